"""What only the library can judge about a run spec, and the env catalogue (the config itself:
``spec_config``, whose ``make_config`` is re-exported here).

Imports ``nnx_ppo`` (and so JAX): it runs in run processes and in the spec-checker process
(``checker``), never in the API process itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from nnx_ppo import catalogue, plugins
from nnx_ppo.algorithms.config import (
    DistillationTrainConfig,
    TrainConfig,
)
from nnx_ppo.algorithms.registry import algorithm_for
from nnx_ppo.networks.graph_spec import GraphSpecError
from server.schemas import NetworkSpec
from server.spec.spec_config import MAX_TOTAL_STEPS as MAX_TOTAL_STEPS
from server.spec.spec_config import Loc, SpecError, config_errors, total_steps
from server.spec.spec_config import make_config as make_config


def check_spec(
    spec: Mapping[str, Any],
    teacher_network: Mapping[str, Any] | None,
    resume_checkpoint: str | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Field-level errors of a spec (already shape-checked by ``schemas.RunCreate``): the
    config, the env and its overrides, the network against the env, for a distillation
    run, the teacher's network against the env, videos only for an env that renders, and
    the checkpoint of ``resume_from`` (at ``resume_checkpoint``) against the network and
    ``n_envs``. Returns the errors (empty when valid) and the run's total steps."""
    from nnx_ppo import envs
    from nnx_ppo.algorithms.training import check_compatible
    from nnx_ppo.presets import make_networks

    errors: list[dict[str, Any]] = []
    steps = 0
    config: TrainConfig | DistillationTrainConfig | None = None
    config, config_problems = config_errors(spec.get("kind", "ppo"), spec.get("config") or {})
    errors += [problem.as_detail() for problem in config_problems]
    if config is not None:
        steps = total_steps(config)
    env_spec = spec["env"]
    try:
        env = envs.load(env_spec["name"], env_spec.get("overrides") or {})
    except ValueError as error:
        # Missing Menagerie assets (or a plugin that fails) are the env's fault, not its
        # overrides'.
        missing = isinstance(error, envs.AssetsMissing | plugins.PluginUnavailable)
        known = env_spec["name"] in envs.available_envs() and not missing
        loc: Loc = ("env", "overrides") if known else ("env", "name")
        errors.append(SpecError(loc, str(error)).as_detail())
        return errors, steps
    if env_spec.get("randomize") and env_spec["name"] not in catalogue.RANDOMIZED_ENVS:
        message = (
            f"{env_spec['name']!r} has no domain randomizer in MuJoCo Playground; these "
            f"envs have one: {', '.join(catalogue.RANDOMIZED_ENVS)}"
        )
        errors.append(SpecError(("env", "randomize"), message).as_detail())
    if config is not None and config.video.enabled and not callable(getattr(env, "render", None)):
        message = (
            f"the env {env_spec['name']!r} cannot be rendered (the built-in pure-JAX envs "
            "have no render method): disable video or pick a MuJoCo Playground env"
        )
        errors.append(SpecError(("config", "video", "enabled"), message).as_detail())
    networks = {"network": spec.get("network") or {"kind": "mlp"}}
    if teacher_network is not None:
        networks["teacher"] = teacher_network
    built: dict[str, Any] = {}
    for where, network_spec in networks.items():
        key_error = obs_key_error(network_spec, env)
        if key_error is not None:
            errors.append(SpecError((where, *key_error.loc), key_error.msg).as_detail())
            continue
        try:
            fields = network_fields(dict(network_spec), env)
            built[where] = make_networks(fields, env.observation_size, env.action_size, 0)
            check_compatible(env, built[where])
        except GraphSpecError as error:  # one problem per place in the graph's description
            errors += [SpecError((where, *loc), msg).as_detail() for loc, msg in error.problems]
        except (TypeError, ValueError) as error:
            loc = _plugin_loc(where, error) or _network_loc(where, str(error))
            errors.append(SpecError(loc, str(error)).as_detail())
    if isinstance(config, TrainConfig) and "network" in built:
        errors += _segment_errors(built["network"], config)
    if resume_checkpoint is not None and config is not None and "network" in built:
        randomized = bool(env_spec.get("randomize"))
        errors += _resume_errors(resume_checkpoint, built["network"], config, randomized)
    return errors, steps


def _segment_errors(network: Any, config: TrainConfig) -> list[dict[str, Any]]:
    """``ppo.minibatch_segment_length`` with a network that carries state (it needs whole
    envs in its minibatches)."""
    from nnx_ppo.algorithms.step import check_segments

    try:
        check_segments(network.initialize_state(1), config.ppo)
    except ValueError as error:
        loc: Loc = ("config", "ppo", "minibatch_segment_length")
        return [SpecError(loc, str(error)).as_detail()]
    return []


def metric_keys(spec: Mapping[str, Any]) -> list[str] | None:
    """The metric keys a run of ``spec`` (valid) will report, as traced by
    ``nnx_ppo.algorithms.metric_keys``; None where they are not known here (distillation)."""
    from nnx_ppo import envs
    from nnx_ppo.algorithms.metric_keys import ppo_metric_keys
    from nnx_ppo.presets import make_networks

    config = make_config(spec.get("kind", "ppo"), spec.get("config") or {})
    if not isinstance(config, TrainConfig):
        return None
    env = envs.load(spec["env"]["name"], spec["env"].get("overrides") or {})
    fields = network_fields(dict(spec.get("network") or {"kind": "mlp"}), env)
    networks = make_networks(fields, env.observation_size, env.action_size, 0)
    return ppo_metric_keys(env, networks, config)


def _resume_errors(
    path: str, network: Any, config: TrainConfig | DistillationTrainConfig, randomized: bool
) -> list[dict[str, Any]]:
    """Errors of resuming ``config``'s run with ``network`` (and domain randomization when
    ``randomized``) from the checkpoint at ``path``, on the field that causes each."""
    from nnx_ppo.algorithms.checkpointing import checkpoint_misfits

    section = algorithm_for(config).section
    n_envs = getattr(config, section).n_envs
    try:
        misfits = checkpoint_misfits(path, network, n_envs, randomized)
    except (OSError, ValueError) as error:
        return [SpecError(("resume_from",), f"cannot read the checkpoint: {error}").as_detail()]
    locs: dict[str, Loc] = {
        "network": ("network",),
        "n_envs": ("config", section, "n_envs"),
        "randomize": ("env", "randomize"),
    }
    return [
        SpecError(locs[field], f"does not fit the checkpoint of resume_from: {why}").as_detail()
        for field, why in misfits.items()
    ]


def obs_key_error(network: Mapping[str, Any], env: Any) -> SpecError | None:
    """An error on ``policy_obs_key`` / ``value_obs_key`` (loc relative to the network)
    when the env's observation has no such key or is not a dict, else None."""
    size = env.observation_size
    for field in ("policy_obs_key", "value_obs_key"):
        key = network.get(field)
        if key is None:
            continue
        if not isinstance(size, Mapping):
            return SpecError(
                (field,),
                f"{field} {key!r} needs dict observations; this env's observation is an "
                f"array of size {size}",
            )
        if key not in size:
            return SpecError(
                (field,),
                f"{field} {key!r} is not a key of the observation; its keys: {sorted(size)}",
            )
    return None


def network_fields(fields: dict[str, Any], env: Any) -> dict[str, Any]:
    """A spec's network fields, with ``reward_streams`` taken from the env (one value head
    per stream of a dict reward) unless the spec names them."""
    from nnx_ppo.envs.loading import reward_streams

    plugin = str(fields.get("kind", "")).startswith(plugins.KIND_PREFIX)
    if fields.get("reward_streams") is None and not plugin:  # a plugin's are its own
        streams = reward_streams(env)
        if streams is not None:
            return {**fields, "reward_streams": streams}
    return fields


def spec_network_fields(spec: Mapping[str, Any], env: Any) -> dict[str, Any]:
    """The network fields of a run's (validated) spec, as ``presets.make_networks`` takes
    them (see ``network_fields``)."""
    return network_fields(NetworkSpec(**spec["network"]).factory_fields(), env)


_NETWORK_FIELDS = (
    "activation",
    "actor_hidden_sizes",
    "critic_hidden_sizes",
    "lstm_size",
    "normalize_obs",
    "entropy_weight",
    "min_std",
    "reward_streams",
    "policy_obs_key",
    "value_obs_key",
    "precision",
)


def _plugin_loc(where: str, error: Exception) -> Loc | None:
    """A plugin network's refusal: on the argument it names, else on ``kind``."""
    if isinstance(error, plugins.PluginArgumentError):
        return (where, "kwargs", error.argument)
    if isinstance(error, plugins.PluginError):
        return (where, "kind")
    return None


def _network_loc(where: str, message: str) -> Loc:
    """The network field an error message names, if it names one."""
    named = [name for name in _NETWORK_FIELDS if name in message]
    return (where, named[0]) if len(named) == 1 else (where,)


def preset_answer(name: str, variant: str) -> dict[str, Any]:
    """``GET /api/envs/{name}/preset``'s body: ``nnx_ppo.presets.preset(name, variant)`` as
    ``{"env", "variant", "source", "unmapped", "spec"}``, where ``spec`` (``env``, ``network``,
    ``config``) is a run spec ``POST /api/runs`` accepts as it is."""
    from nnx_ppo.presets import preset
    from nnx_ppo.presets.overrides import to_json

    found = to_json(preset(name, variant))
    return {
        "env": name,
        "variant": found["variant"],
        "source": found["source"],
        "unmapped": found["unmapped"],
        "spec": {key: found[key] for key in ("env", "network", "config")},
    }


def describe_envs(include_playground: bool = True) -> Iterator[dict[str, Any]]:
    """``envs.describe`` of every env that can be trained: built-ins first. An env that
    fails to load (e.g. a missing asset) is left out."""
    from nnx_ppo import envs

    yield from _describe(list(envs.BUILTIN_ENVS))  # first: importing Playground is slow
    yield from _describe(catalogue.plugin_env_names(), failures=True)
    if include_playground:
        yield from _describe([n for n in envs.available_envs() if n not in envs.BUILTIN_ENVS])


def _describe(names: list[str], failures: bool = False) -> Iterator[dict[str, Any]]:
    """``envs.describe`` of each env; one that fails is left out (e.g. assets that cannot
    be fetched offline), or with ``failures`` given as ``{"name", "source", "error"}``
    (a plugin that fails to import or to build is listed with its error)."""
    from nnx_ppo import envs

    for name in names:
        try:
            entry = envs.describe(name)
        except Exception as error:
            if failures:
                message = f"{type(error).__name__}: {error}"
                yield {"name": name, "source": catalogue.source_of(name), "error": message}
            continue
        size = entry["observation_size"]
        if isinstance(size, Mapping):
            entry["observation_size"] = {k: list(v) for k, v in size.items()}
        else:
            entry["observation_size"] = int(size)
        yield entry
