"""The run spec as submitted (``RunCreate``: env, network, config, references).

A run spec (``RunCreate``) is checked here for its shape; what only the library can judge
(env names and overrides, network fields, config values) is checked by ``spec_check`` in a
separate process before anything is queued.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from server.user_text import JsonObject, NoteText, PlainText

Name = Field(min_length=1, max_length=200)


class EnvSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200, description="An env from GET /api/envs.")
    overrides: JsonObject = Field(
        default_factory=dict, description="Config overrides of the env (MuJoCo Playground)."
    )
    randomize: bool | None = Field(
        default=None,
        description="Domain randomization, as MuJoCo Playground trains the env: each training "
        "env steps its own variant of the robot's model (friction, masses, ...; Playground's "
        "randomizer for the env), evaluation the nominal one. Only for envs with a randomizer "
        "(GET /api/envs: domain_randomizer). Default: the preset's (on where there is a "
        'randomizer); off with "preset": false. The stored spec holds true or false.',
    )


PLUGIN_KIND = re.compile(r"plugin:[A-Za-z0-9_.\-]{1,100}")
"""A plugin network's kind (``nnx_ppo.plugins.KIND_PREFIX`` and an entry point's name): a
name, never a module path (no ``:`` after the prefix); the service only ever looks it up
among the installed entry points."""


GraphName = Annotated[str, Field(min_length=1, max_length=100)]


class GraphPopulation(BaseModel):
    """A population of a graph network (``network.kind: "graph"``)."""

    model_config = ConfigDict(extra="forbid")

    name: GraphName
    size: int = Field(ge=1, le=65536, description="Units.")
    activation: str | None = Field(
        default=None, max_length=32, description="swish, relu, tanh, elu, gelu; null: linear."
    )
    input_from: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description='An observation key this input population adds to its input ("obs" for '
        "an env whose observation is one array); its size is that entry's features.",
    )
    output_to: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The graph output this population's value is, named by actions/value.",
    )


class GraphConnection(BaseModel):
    """An edge ``src -> dst`` of a graph network, read ``delay`` steps late."""

    model_config = ConfigDict(extra="forbid")

    src: GraphName
    dst: GraphName
    delay: int = Field(default=0, ge=0, le=1000)
    reciprocal: bool = Field(default=False, description="Also dst -> src, with the same delay.")


class NetworkSpec(BaseModel):
    """The network: ``kind`` picks the factory, the other fields are its keyword arguments
    (absent fields take the factory's defaults); a plugin network's arguments are in
    ``kwargs``."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(
        default="mlp",
        max_length=107,
        description="'mlp', 'lstm', 'graph' (a population graph: populations, connections, "
        "actions, value), or 'plugin:<name>': a network factory an installed package "
        "registers under the entry-point group nnx_ppo.networks (only installed entry "
        "points can be named; nothing is imported by path).",
    )
    kwargs: JsonObject | None = Field(
        default=None,
        description="A plugin network's keyword arguments, checked against its factory's "
        "signature and type hints (kind 'plugin:<name>' only).",
    )
    actor_hidden_sizes: list[int] | None = Field(default=None, max_length=16)
    critic_hidden_sizes: list[int] | None = Field(default=None, max_length=16)
    lstm_size: int | None = Field(default=None, ge=1, le=65536)
    normalize_obs: bool | None = None
    activation: str | None = Field(default=None, max_length=32)
    entropy_weight: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    min_std: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    reward_streams: list[str] | None = Field(
        default=None,
        max_length=16,
        description="One value head per reward stream of a dict reward; default: the env's.",
    )
    policy_obs_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Asymmetric actor-critic (kind 'mlp', dict observations): the "
        "observation key the policy reads, e.g. 'state'. Given with value_obs_key.",
    )
    value_obs_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        validate_default=True,
        description="The observation key the value reads, e.g. 'privileged_state' (the "
        "policy never sees it). Given with policy_obs_key.",
    )
    precision: Literal["float32", "bfloat16"] | None = Field(
        default=None,
        description="The arithmetic of the network's matrix products: 'float32' (default) or "
        "'bfloat16' (operands rounded to bfloat16, accumulated in float32; parameters, "
        "optimizer state, normalizer statistics, losses and GAE stay float32). Kinds 'mlp', "
        "'lstm' and 'graph'.",
    )

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in ("mlp", "lstm", "graph") and not PLUGIN_KIND.fullmatch(kind):
            raise ValueError(
                f"must be 'mlp', 'lstm', 'graph' or 'plugin:<name>' (an installed plugin network's "
                f"entry-point name), got {kind!r}"
            )
        return kind

    populations: list[GraphPopulation] | None = Field(
        default=None,
        max_length=256,
        description="Kind 'graph': the populations of units (inputs read observation keys, "
        "outputs feed the action heads and the value).",
    )
    connections: list[GraphConnection] | None = Field(
        default=None, max_length=4096, description="Kind 'graph': the edges between populations."
    )
    actions: dict[GraphName, GraphName] | None = Field(
        default=None,
        max_length=8,
        description="Kind 'graph': each action head's output (2 x the env's action size "
        'units: a mean and a raw std per action), e.g. {"arm": "arm"}.',
    )
    value: GraphName | dict[GraphName, GraphName] | None = Field(
        default=None,
        description="Kind 'graph': the value's output (one unit; default 'value'), or one "
        "output per reward stream.",
    )

    @model_validator(mode="after")
    def _graph_fields(self) -> NetworkSpec:
        graph_only = ("populations", "connections", "actions", "value")
        if self.kind != "graph":
            given = [name for name in graph_only if getattr(self, name) is not None]
            if given:
                raise ValueError(f"{', '.join(given)}: only for kind 'graph'")
        elif self.populations is None or self.actions is None:
            raise ValueError("kind 'graph' needs populations and actions")
        return self

    @field_validator("actor_hidden_sizes", "critic_hidden_sizes")
    @classmethod
    def _layer_sizes(cls, sizes: list[int] | None) -> list[int] | None:
        if sizes is not None and any(not 1 <= s <= 65536 for s in sizes):
            raise ValueError("layer sizes must be between 1 and 65536")
        return sizes

    @field_validator("lstm_size")
    @classmethod
    def _lstm_only(cls, size: int | None, info: ValidationInfo) -> int | None:
        if size is not None and info.data.get("kind") != "lstm":
            raise ValueError("lstm_size applies only to kind 'lstm'")
        return size

    @field_validator("policy_obs_key")
    @classmethod
    def _mlp_only(cls, key: str | None, info: ValidationInfo) -> str | None:
        if key is not None and info.data.get("kind") != "mlp":
            raise ValueError("policy_obs_key and value_obs_key apply only to kind 'mlp'")
        return key

    @field_validator("value_obs_key")
    @classmethod
    def _keys_together(cls, key: str | None, info: ValidationInfo) -> str | None:
        if "policy_obs_key" not in info.data:  # policy_obs_key itself was refused
            return key
        if (key is None) != (info.data["policy_obs_key"] is None):
            raise ValueError("policy_obs_key and value_obs_key must be given together")
        return key

    @model_validator(mode="after")
    def _plugin_takes_kwargs(self) -> NetworkSpec:
        plugin = self.kind not in ("mlp", "lstm", "graph")
        if self.kwargs is not None and not plugin:
            raise ValueError("kwargs applies only to plugin networks (kind 'plugin:<name>')")
        named = sorted(
            name
            for name in self.model_fields_set - {"kind", "kwargs"}
            if getattr(self, name) is not None
        )
        if plugin and named:
            raise ValueError(
                f"{', '.join(named)} apply only to kinds 'mlp', 'lstm' and 'graph': a plugin "
                "network takes its arguments in kwargs"
            )
        return self

    def factory_fields(self) -> dict[str, Any]:
        """``{"kind", **set fields}`` as ``presets.make_networks`` takes it."""
        return self.model_dump(exclude_none=True)


class CheckpointRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(min_length=1, max_length=64)
    step: int | None = Field(default=None, ge=0, description="The newest checkpoint if null.")


class ResourcesSpec(BaseModel):
    """What a run's process needs. The local worker assigns ``gpus`` devices to it (on a
    CPU-only worker, that many host devices); an executor on a cluster would ask for the
    same (Ray: ``num_gpus``, ``num_cpus``). The local worker does not reserve CPUs."""

    model_config = ConfigDict(extra="forbid")

    gpus: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        strict=True,
        description="Devices the run trains on, data-parallel (default 1); at most what the "
        "largest registered worker has.",
    )
    cpus: int | None = Field(
        default=None, ge=1, le=4096, strict=True, description="CPU cores (for cluster executors)."
    )
    node: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{8,64}$",
        description="Ray executor: the node to place the run on while it is alive (a node id "
        "of GET /api/health); another node when it is gone.",
    )


class PresetRef(BaseModel):
    """Which preset fills a spec's left-out fields (``server.spec.preset_fill``). A stored
    spec records ``name``, ``variant``, ``source`` and ``filled``; given back (a spec copied
    from a run), ``source`` and ``filled`` are recomputed."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(
        default=None, max_length=200, description="The env whose preset it is: the spec's env."
    )
    variant: Literal["cpu", "gpu"] | None = Field(
        default=None,
        description="The machine it is sized for; default: gpu when a live worker has a GPU, "
        "else cpu (as GET /api/envs/{name}/preset).",
    )
    source: str | None = Field(default=None, max_length=200, description="Read only.")
    filled: list[Annotated[str, Field(max_length=200)]] | None = Field(
        default=None, max_length=1000, description="Read only: the spec paths it filled."
    )


class RunCreate(BaseModel):
    """A run spec, as ``POST /api/runs`` takes it (see DESIGN.md)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["ppo", "distillation"] = "ppo"
    name: PlainText | None = Field(default=None, min_length=1, max_length=200)
    env: EnvSpec
    network: NetworkSpec = Field(default_factory=NetworkSpec)
    config: JsonObject = Field(
        default_factory=dict,
        description="TrainConfig (ppo) or DistillationTrainConfig (distillation) fields; "
        "each optional: a field left out takes the env's preset (see preset). Integral "
        "numbers may be written as floats (1e6); total_steps is at most 1e12.",
    )
    preset: bool | PresetRef | None = Field(
        default=True,
        description="true (default): fields left out of env.overrides, network and config "
        "take the env's preset; false: the library's defaults; an object picks the variant. "
        "The stored spec names the preset and the paths it filled (null: the env has none).",
    )
    tags: list[PlainText] = Field(default_factory=list, max_length=32)
    notes: NoteText = Field(default="", max_length=10_000)
    resume_from: CheckpointRef | None = None
    teacher: CheckpointRef | None = None
    resources: ResourcesSpec | None = None

    def stored(self) -> dict[str, Any]:
        """The spec as stored with the run: JSON, the network without unset fields."""
        return {**self.model_dump(mode="json"), "network": self.network.factory_fields()}

    @model_validator(mode="after")
    def _teacher_matches_kind(self) -> RunCreate:
        if self.kind == "distillation" and self.teacher is None:
            raise ValueError("a distillation run needs a teacher: {'run_id': ..., 'step': null}")
        if self.kind == "ppo" and self.teacher is not None:
            raise ValueError("teacher applies only to kind 'distillation'")
        if any(not 0 < len(tag) <= 64 for tag in self.tags):
            raise ValueError("tags must be 1 to 64 characters long")
        return self
