"""A sweep's request (``POST /api/sweeps``): the base run spec, the search space over spec
paths, the method, the objective and the pruner; and what a trial's values do to the spec.

A path names a field of the stored run spec with dots: ``config.ppo.learning_rate``,
``network.actor_hidden_sizes``, ``env.overrides.reward_scale``. A space entry is one of
``{"uniform": [lo, hi]}``, ``{"log_uniform": [lo, hi]}``, ``{"int_uniform": [lo, hi]}``,
``{"choice": [v, ...]}`` or ``{"grid": [v, ...]}`` (``grid`` is ``choice`` that the grid
method enumerates). Nothing here imports Optuna or JAX.
"""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from server.schemas import RunCreate
from server.user_text import BoundedJson, PlainText

MAX_PARAMETERS = 12
MAX_VALUES = 32
"""Values of one ``choice`` or ``grid`` entry."""
MAX_CHECKS = 64
"""Specs checked before a sweep is queued (each extreme and each choice)."""
INT_CHECKED_ALL = 16
"""An ``int_uniform`` with fewer values has each of them checked."""
MAX_TRIALS = 1000
MAX_PARALLEL = 32
MAX_VALUE_CHARS = 1000
"""A choice's value, as JSON."""

FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def path_problem(path: str) -> str | None:
    """Why ``path`` is not a path a space may name (None when it is one): ``config.<field>``
    (nested up to 4 deep), ``network.<field>`` (``network.kwargs.<argument>`` for a plugin
    network) or ``env.overrides.<field>``."""
    parts = path.split(".")
    if not all(FIELD.fullmatch(p) for p in parts):
        return "its parts must be field names joined by dots"
    if parts[0] == "config" and 2 <= len(parts) <= 5:
        return None
    if parts[0] == "network" and (len(parts) == 2 or (len(parts) == 3 and parts[1] == "kwargs")):
        return None
    if parts[:2] == ["env", "overrides"] and len(parts) == 3:
        return None
    return "a space names config.<field>[.<field>...], network.<field> or env.overrides.<field>"


RANGE_KINDS = ("uniform", "log_uniform", "int_uniform")
CHOICE_KINDS = ("choice", "grid")


class SpaceEntry(BaseModel):
    """One dimension of the space: exactly one of its fields."""

    model_config = ConfigDict(extra="forbid")

    uniform: tuple[float, float] | None = Field(default=None, description="[low, high]")
    log_uniform: tuple[float, float] | None = Field(
        default=None, description="[low, high], low > 0, sampled uniformly in log space"
    )
    int_uniform: tuple[int, int] | None = Field(default=None, description="[low, high], both in")
    choice: list[BoundedJson] | None = Field(default=None, min_length=1, max_length=MAX_VALUES)
    grid: list[BoundedJson] | None = Field(default=None, min_length=1, max_length=MAX_VALUES)

    @model_validator(mode="after")
    def _one_kind(self) -> SpaceEntry:
        kinds = [k for k in (*RANGE_KINDS, *CHOICE_KINDS) if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("give exactly one of uniform, log_uniform, int_uniform, choice, grid")
        kind = kinds[0]
        if kind in RANGE_KINDS:
            low, high = getattr(self, kind)
            if not (math.isfinite(low) and math.isfinite(high)):
                raise ValueError(f"{kind}: bounds must be finite")
            if not low < high:
                raise ValueError(f"{kind}: low must be below high, got [{low}, {high}]")
            if kind == "log_uniform" and low <= 0:
                raise ValueError(f"log_uniform: low must be above 0, got {low}")
        else:
            values = getattr(self, kind)
            encoded = [encode_choice(v) for v in values]
            if any(len(e) > MAX_VALUE_CHARS for e in encoded):
                raise ValueError(f"{kind}: a value is longer than {MAX_VALUE_CHARS} characters")
            if len(set(encoded)) != len(encoded):
                raise ValueError(f"{kind}: values must be distinct")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in (*RANGE_KINDS, *CHOICE_KINDS) if getattr(self, k) is not None)

    def extremes(self) -> list[Any]:
        """A range's bounds, or every choice."""
        values: list[Any] = list(getattr(self, self.kind))
        return values

    def check_values(self) -> list[Any]:
        """The values whose specs are checked before the sweep is queued: every choice; a
        float range's bounds; every integer of an ``int_uniform`` of at most
        ``INT_CHECKED_ALL`` values, else its bounds, their neighbours and its middle (an
        integer field may have constraints, e.g. divisibility, that the bounds meet and a
        value between them does not)."""
        if self.int_uniform is not None:
            low, high = self.int_uniform
            if high - low < INT_CHECKED_ALL:
                return list(range(low, high + 1))
            return sorted({low, low + 1, (low + high) // 2, high - 1, high})
        return self.extremes()

    def size(self) -> int | None:
        """The number of distinct values (None for a continuous range)."""
        if self.kind in CHOICE_KINDS:
            return len(getattr(self, self.kind))
        if self.int_uniform is not None:
            return self.int_uniform[1] - self.int_uniform[0] + 1
        return None


class Objective(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metric: str = Field(
        default="eval/episode_reward",
        min_length=1,
        max_length=200,
        description="A metric key of the trials; its last value is the trial's objective, "
        "and its values as they arrive are what the pruner judges.",
    )
    mode: Literal["max", "min"] = "max"


class PrunerSpec(BaseModel):
    """Stops trials early: ``median`` (below the median of finished trials at the same
    step) or ``asha`` (asynchronous successive halving). Given as an object or a name."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["median", "asha", "none"]
    startup_trials: int = Field(
        default=2, ge=0, le=100, description="median: finished trials before it prunes"
    )
    warmup_steps: int = Field(default=0, ge=0, description="median: steps before it prunes")
    min_resource: int | None = Field(
        default=None, ge=1, description="asha: the first rung's steps (null: estimated)"
    )
    reduction_factor: int = Field(default=3, ge=2, le=100, description="asha")


class SweepCreate(BaseModel):
    """A sweep, as ``POST /api/sweeps`` takes it."""

    model_config = ConfigDict(extra="forbid")

    name: PlainText | None = Field(default=None, min_length=1, max_length=200)
    spec: RunCreate = Field(description="The base run spec; each trial changes its paths.")
    space: dict[str, SpaceEntry] = Field(
        min_length=1,
        max_length=MAX_PARAMETERS,
        description="Spec path -> values, e.g. {'config.ppo.learning_rate': "
        "{'log_uniform': [1e-4, 3e-3]}}.",
    )
    method: Literal["grid", "random", "tpe"] = "tpe"
    max_trials: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TRIALS,
        description="Trials in all; default: the grid's size (grid), else 20.",
    )
    parallel: int = Field(
        default=1, ge=1, le=MAX_PARALLEL, description="Trials queued or running at once."
    )
    objective: Objective = Field(default_factory=Objective)
    pruner: PrunerSpec | None = None
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="The sampler's seed.")

    @field_validator("pruner", mode="before")
    @classmethod
    def _pruner_name(cls, value: Any) -> Any:
        return {"kind": value} if isinstance(value, str) else value

    @field_validator("space")
    @classmethod
    def _paths(cls, space: dict[str, SpaceEntry]) -> dict[str, SpaceEntry]:
        for path in space:
            problem = path_problem(path)
            if problem is not None:
                raise ValueError(f"{path!r} is not a spec path: {problem}")
        return space

    @model_validator(mode="after")
    def _grid(self) -> SweepCreate:
        if self.method == "grid":
            continuous = [p for p, e in self.space.items() if e.kind not in CHOICE_KINDS]
            if continuous:
                raise ValueError(
                    f"the grid method takes grid or choice values only; {continuous[0]} is "
                    f"{self.space[continuous[0]].kind}"
                )
        return self

    def grid_size(self) -> int:
        size = 1
        for entry in self.space.values():
            size *= entry.size() or 1
        return size

    def trials(self) -> int:
        """``max_trials``, or its default."""
        if self.max_trials is not None:
            return self.max_trials
        return min(self.grid_size(), MAX_TRIALS) if self.method == "grid" else 20


class PathError(ValueError):
    """A path that cannot be set in the spec (a part of it is not an object)."""


def with_values(spec: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A copy of the stored run ``spec`` with each path set to its value (objects on the
    way are created when absent)."""
    out = copy.deepcopy(spec)
    for path, value in values.items():
        node = out
        parts = path.split(".")
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise PathError(f"{'.'.join(parts[: i + 1])} is not an object in the spec")
            node = child
        node[parts[-1]] = copy.deepcopy(value)
    return out


def variants(sweep: SweepCreate) -> list[tuple[str | None, dict[str, Any]]]:
    """The trial values to check before queueing: each path at each of its check values
    (the others as in the base spec), then every path at its first extreme, then at its last.
    Each comes with the path it tests (None for a combination)."""
    out: list[tuple[str | None, dict[str, Any]]] = []
    for path, entry in sweep.space.items():
        out.extend((path, {path: value}) for value in entry.check_values())
    if len(sweep.space) > 1:
        out.append((None, {p: e.extremes()[0] for p, e in sweep.space.items()}))
        out.append((None, {p: e.extremes()[-1] for p, e in sweep.space.items()}))
    return out


def trial_total_steps(sweep: SweepCreate, values: dict[str, Any], base_total: int) -> int:
    """A trial's total steps: the swept value when the space sets them."""
    group = "distillation" if sweep.spec.kind == "distillation" else "ppo"
    value = values.get(f"config.{group}.total_steps")
    return value if isinstance(value, int) and not isinstance(value, bool) else base_total


def encode_choice(value: Any) -> str:
    """A choice as Optuna stores it (a string: its canonical JSON)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def decode_choice(text: str) -> Any:
    return json.loads(text)
