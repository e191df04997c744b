"""Presets as JSON, and dotted overrides of a preset (``ppo.learning_rate=3e-4``).

A preset's JSON (``to_json``) is in run-spec terms, every config field included::

    {"env": {"name", "overrides", "randomize"}, "network": {"kind", ...},
     "config": {"ppo": {...}, "eval": {...}, "video": {...}, "seed", ...},
     "source", "variant", "unmapped"}

``from_json`` reads it back (unknown fields and wrong types are refused, naming the dotted
path); ``apply`` sets dotted keys on a preset:

- ``ppo.X``, ``eval.X``, ``video.X`` and top-level ``TrainConfig`` fields (``seed``,
  ``checkpoint_every_steps``, ...): the config, type-checked against the field;
- ``network.X``: a keyword of the network's factory (``network.kind`` picks the factory);
- ``env.randomize``: train with the env's domain randomizer (``true``/``false``);
- ``env.X``: an env config override (``env.episode_length=500``; the env judges it when it
  loads).

Every error is an ``OverrideError`` (a ``ValueError``) whose message names the key and the
value, never a stack trace's worth of internals.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from nnx_ppo import catalogue
from nnx_ppo.algorithms.config import EvalConfig, PPOConfig, TrainConfig, VideoConfig
from nnx_ppo.algorithms.types import LoggingLevel
from nnx_ppo.networks import factories

_SECTIONS: dict[str, type] = {"ppo": PPOConfig, "eval": EvalConfig, "video": VideoConfig}
_FACTORIES: dict[str, Callable[..., Any]] = dict(factories.FACTORIES)


class OverrideError(ValueError):
    """A dotted override (or a preset JSON field) that cannot apply; names the key."""


def parse_assignment(text: str) -> tuple[str, Any]:
    """``"ppo.learning_rate=3e-4"`` -> ``("ppo.learning_rate", 3e-4)``. The value is read as
    JSON (numbers, ``true``, ``null``, ``[64,64]``); anything else is a string."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise OverrideError(f"override {text!r} is not KEY=VALUE (e.g. ppo.learning_rate=3e-4)")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return key, value


def apply(preset: Any, overrides: Iterable[tuple[str, Any]]) -> Any:
    """The preset with dotted ``overrides`` set (see the module docstring). A new
    ``ppo.total_steps`` moves the evaluation and checkpoint cadences that are not set too
    (``nnx_ppo.presets.with_total``).

    Raises:
        OverrideError: naming the first key that is unknown or whose value is refused.
    """
    overrides = list(overrides)
    config = config_json(preset.config)
    network = dict(preset.network)
    env = dict(preset.env_overrides)
    randomize = preset.randomize
    for key, value in overrides:
        section, _, rest = key.partition(".")
        if key == "env.randomize":
            randomize = _randomize(value, preset.env)
        elif section == "env" and rest:
            env[rest] = value
        elif section == "network" and rest:
            network[rest] = value
        elif section in _SECTIONS and rest:
            if rest not in _field_names(_SECTIONS[section]):
                raise _unknown(key, _SECTIONS[section], section)
            config[section][rest] = value
        elif not rest and section in _field_names(TrainConfig) and section not in _SECTIONS:
            config[section] = value
        else:
            raise OverrideError(
                f"unknown override key {key!r}; use ppo.*, eval.*, video.*, network.*, env.* "
                f"or one of {', '.join(n for n in _field_names(TrainConfig) if n not in _SECTIONS)}"
            )
    keys = {key for key, _ in overrides}
    train_config = make_train_config(config)
    if "ppo.total_steps" in keys:  # the cadences follow a new total unless set too
        from nnx_ppo.presets import with_total

        train_config = with_total(
            preset.config,
            train_config,
            follow_eval="eval.every_steps" not in keys,
            follow_checkpoint="checkpoint_every_steps" not in keys,
        )
    return dataclasses.replace(
        preset,
        env_overrides=env,
        network=check_network(network),
        config=train_config,
        randomize=randomize,
    )


def to_json(preset: Any) -> dict[str, Any]:
    """The preset as JSON (see the module docstring); ``from_json`` reads it back."""
    return {
        "env": {
            "name": preset.env,
            "overrides": _jsonable(dict(preset.env_overrides)),
            "randomize": preset.randomize,
        },
        "network": _jsonable(dict(preset.network)),
        "config": config_json(preset.config),
        "source": preset.source,
        "variant": preset.variant,
        "unmapped": list(preset.unmapped),
    }


def from_json(data: Any) -> Any:
    """A preset from ``to_json``'s form. Only ``env.name`` is required: a missing network
    or config field takes the library's default.

    Raises:
        OverrideError: naming the field (e.g. ``config.ppo.n_envs``) that is wrong.
    """
    from nnx_ppo.presets import Preset

    if not isinstance(data, Mapping):
        raise OverrideError("a preset JSON must be an object")
    unknown = set(data) - {"env", "network", "config", "source", "variant", "unmapped"}
    if unknown:
        raise OverrideError(f"unknown preset field(s): {', '.join(sorted(unknown))}")
    env = data.get("env")
    if not isinstance(env, Mapping) or not isinstance(env.get("name"), str):
        raise OverrideError('env must be an object with a "name": {"name": "CartpoleBalance"}')
    env_overrides = env.get("overrides") or {}
    if not isinstance(env_overrides, Mapping):
        raise OverrideError("env.overrides must be an object")
    unknown = set(env) - {"name", "overrides", "randomize"}
    if unknown:
        raise OverrideError(f"unknown env field(s): {', '.join(sorted(unknown))}")
    network = data.get("network") or {"kind": "mlp"}
    if not isinstance(network, Mapping):
        raise OverrideError("network must be an object")
    return Preset(
        env=env["name"],
        env_overrides=dict(env_overrides),
        network=check_network(dict(network)),
        config=make_train_config(data.get("config") or {}),
        source=str(data.get("source", "file")),
        variant=str(data.get("variant", "cpu")),
        unmapped=tuple(str(u) for u in data.get("unmapped") or ()),
        randomize=_randomize(env.get("randomize", False), env["name"]),
    )


def _randomize(value: Any, env: str) -> bool:
    """``env.randomize``: a bool, true only for an env with a domain randomizer."""
    if not isinstance(value, bool):
        raise OverrideError(f"env.randomize must be true or false, got {value!r}")
    if value and env not in catalogue.RANDOMIZED_ENVS:
        raise OverrideError(
            f"env.randomize: {env!r} has no domain randomizer in MuJoCo Playground; "
            f"these have one: {', '.join(catalogue.RANDOMIZED_ENVS)}"
        )
    return value


_NOT_FIELDS = frozenset({"obs_size", "action_size", "rngs"})
"""A factory's arguments that come from the env and the seed, not from ``network``."""


def check_network(network: dict[str, Any]) -> dict[str, Any]:
    """``network`` if its keys are keyword arguments of its kind's factory (their values are
    judged when the network is built)."""
    kind = network.get("kind", "mlp")
    factory = _FACTORIES.get(kind) if isinstance(kind, str) else None
    if factory is None:
        raise OverrideError(f"network.kind must be 'mlp' or 'lstm', got {kind!r}")
    accepted = [
        name
        for name, p in inspect.signature(factory).parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name not in _NOT_FIELDS
    ]
    for key in network:
        if key != "kind" and key not in accepted:
            raise OverrideError(
                f"unknown network field network.{key} for kind {kind!r}; "
                f"accepted: {', '.join(accepted)}"
            )
    return network


def make_train_config(raw: Mapping[str, Any]) -> TrainConfig:
    """A ``TrainConfig`` from its JSON form (every field optional).

    Raises:
        OverrideError: naming the dotted field that is unknown, of the wrong type, or
            refused by the config's own validation.
    """
    return _build(TrainConfig, raw, "")


def config_json(config: Any) -> dict[str, Any]:
    """A config dataclass as JSON (``LoggingLevel`` as ``"A|B"`` names)."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        out[field.name] = (
            config_json(value) if dataclasses.is_dataclass(value) else _jsonable(value)
        )
    return out


def _build(cls: type, raw: Any, prefix: str) -> Any:
    where = prefix.rstrip(".") or "config"
    if not isinstance(raw, Mapping):
        raise OverrideError(f"{where} must be an object, got {raw!r}")
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for name, value in raw.items():
        key = f"{prefix}{name}"
        if name not in hints:
            raise _unknown(key, cls, where)
        if name in _SECTIONS and cls is TrainConfig:
            kwargs[name] = _build(_SECTIONS[name], value, f"{key}.")
        else:
            try:
                kwargs[name] = _coerce(hints[name], value)
            except (TypeError, ValueError) as error:
                raise OverrideError(f"{key}={value!r}: {error}") from None
    try:
        return cls(**kwargs)
    except ValueError as error:
        message = str(error)
        raise OverrideError(message if where in message else f"{where}: {message}") from None


def _coerce(hint: Any, value: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is not type(None):
                try:
                    return _coerce(option, value)
                except (TypeError, ValueError) as error:
                    errors.append(str(error))
        raise ValueError("; ".join(errors))
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise TypeError("must be true or false")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeError("must be an integer")
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not math.isfinite(float(value)):
                raise ValueError("must be finite")
            return float(value)
        raise TypeError("must be a number")
    if hint is LoggingLevel:
        return _logging_level(value)
    if typing.get_origin(hint) is tuple:
        if not isinstance(value, list | tuple):
            raise TypeError("must be a list")
        item = typing.get_args(hint)[0]
        return tuple(_coerce(item, v) for v in value)
    if typing.get_origin(hint) is dict or hint is dict:
        if not isinstance(value, dict):
            raise TypeError("must be an object")
        return dict(value)
    raise TypeError(f"unsupported field type {hint!r}")


def _logging_level(value: Any) -> LoggingLevel:
    if isinstance(value, int) and not isinstance(value, bool):
        return LoggingLevel(value)
    if not isinstance(value, str):
        raise TypeError("must be LoggingLevel names joined by '|' (e.g. LOSSES|TRAIN_ROLLOUT)")
    level = LoggingLevel(0)
    for name in filter(None, (n.strip().upper() for n in value.split("|"))):
        if name not in LoggingLevel.__members__:
            known = ", ".join(LoggingLevel.__members__)
            raise ValueError(f"unknown LoggingLevel {name!r}; known: {known}")
        level |= LoggingLevel[name]
    return level


def _unknown(key: str, cls: type, where: str) -> OverrideError:
    return OverrideError(f"unknown field {key!r}; {where} accepts: {', '.join(_field_names(cls))}")


def _field_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _jsonable(value: Any) -> Any:
    if isinstance(value, LoggingLevel):
        return "|".join(str(m.name) for m in LoggingLevel if m in value) or "NONE"
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    return value
