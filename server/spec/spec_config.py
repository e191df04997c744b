"""A run spec's ``config`` as the library's frozen config dataclasses (``make_config``), or
every field error in it at once (``config_errors``), each a ``SpecError`` on its place in the
request body.

Imports ``nnx_ppo`` (and so JAX), like ``spec_check``: never imported by the API process.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from nnx_ppo.algorithms.config import (
    DistillationConfig,
    DistillationTrainConfig,
    EvalConfig,
    PPOConfig,
    TrainConfig,
    VideoConfig,
)
from nnx_ppo.algorithms.registry import algorithm_for
from nnx_ppo.algorithms.types import LoggingLevel

Loc = tuple[str | int, ...]


class SpecError(ValueError):
    """An invalid field of a run spec: ``loc`` is its path in the request body."""

    def __init__(self, loc: Loc, msg: str):
        super().__init__(msg)
        self.loc = loc
        self.msg = msg

    def as_detail(self) -> dict[str, Any]:
        return {"loc": ["body", *self.loc], "msg": self.msg, "type": "value_error"}


_NESTED = {
    "ppo": PPOConfig,
    "distillation": DistillationConfig,
    "eval": EvalConfig,
    "video": VideoConfig,
}


MAX_TOTAL_STEPS = 10**12
"""The most env steps a run may ask for (``ppo.total_steps``, ``distillation.total_steps``):
far beyond any run (a GPU does ~1e6 steps/s, so 1e12 is ~12 days), and a bound that keeps
step counts exact in float64 metrics."""


def make_config(kind: str, raw: Mapping[str, Any]) -> TrainConfig | DistillationTrainConfig:
    """The library config of a spec's ``config`` object (every field optional).

    Raises:
        SpecError: naming the first problem; ``config_errors`` lists them all.
    """
    errors: list[SpecError] = []
    config = _config_or_errors(kind, raw, errors)
    if config is None:
        raise errors[0]
    return config


def config_errors(
    kind: str, raw: Any
) -> tuple[TrainConfig | DistillationTrainConfig | None, list[SpecError]]:
    """The library config of a spec's ``config`` (None when invalid) and every problem found
    in it, each on its field: unknown fields, wrong types, values the config's validation
    refuses, and a total above ``MAX_TOTAL_STEPS``."""
    errors: list[SpecError] = []
    return _config_or_errors(kind, raw, errors), errors


def _config_or_errors(
    kind: str, raw: Any, errors: list[SpecError]
) -> TrainConfig | DistillationTrainConfig | None:
    algorithm = algorithm_for(kind)
    top, section = algorithm.config_class, algorithm.section
    config: TrainConfig | DistillationTrainConfig | None = _build(top, raw, ("config",), errors)
    if config is not None and total_steps(config) > MAX_TOTAL_STEPS:
        errors.append(
            SpecError(
                ("config", section, "total_steps"),
                f"must be at most {MAX_TOTAL_STEPS:.0e} (10^12), got {total_steps(config)}",
            )
        )
        return None
    return config


def _build(cls: type, raw: Any, loc: Loc, errors: list[SpecError]) -> Any:
    """``cls`` from its JSON form, or None with the problems appended to ``errors`` (every
    field is judged, not only up to the first bad one)."""
    if not isinstance(raw, Mapping):
        errors.append(SpecError(loc, "must be an object"))
        return None
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    failed = False
    for name, value in raw.items():
        if name not in fields:
            errors.append(SpecError((*loc, name), f"unknown field; accepted: {', '.join(fields)}"))
            failed = True
        elif name in _NESTED and hints[name] is _NESTED[name]:
            kwargs[name] = _build(_NESTED[name], value, (*loc, name), errors)
            failed = failed or kwargs[name] is None
        else:
            try:
                kwargs[name] = _coerce(hints[name], value, (*loc, name))
            except SpecError as error:
                errors.append(error)
                failed = True
    return None if failed else _construct(cls, kwargs, loc, fields, errors)


def _construct(
    cls: type, kwargs: dict[str, Any], loc: Loc, fields: Mapping[str, Any], errors: list[SpecError]
) -> Any:
    """``cls(**kwargs)``; each field its validation refuses is reported once: the refused
    field is set back to its default and the rest judged again."""
    refused: set[str] = set()
    while True:
        try:
            return cls(**kwargs)
        except ValueError as error:
            message = str(error)
            parts = message.split(" ", 1)[0].split(".")
            field = parts[-1] if parts[-1] in fields and len(parts) <= 2 else None
            if field is None or field in refused:
                if field is None:
                    errors.append(SpecError(loc, message))
                return None
            errors.append(SpecError((*loc, field), message))
            refused.add(field)
            if field not in kwargs:  # the default itself is refused with the other values
                return None
            del kwargs[field]


def _coerce(hint: Any, value: Any, loc: Loc) -> Any:
    """JSON value -> the field's Python type; ``SpecError`` when it cannot be one."""
    options = typing.get_args(hint) if _is_union(hint) else (hint,)
    if value is None:
        if type(None) in options:
            return None
        raise SpecError(loc, "must not be null")
    errors = []
    for option in options:
        if option is type(None):
            continue
        try:
            return _coerce_one(option, value)
        except (TypeError, ValueError, KeyError) as error:
            errors.append(str(error))
    raise SpecError(loc, "; ".join(errors) or "invalid value")


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _coerce_one(option: Any, value: Any) -> Any:
    origin = typing.get_origin(option)
    if option is bool:
        if isinstance(value, bool):
            return value
        raise TypeError(f"must be true or false, got {value!r}")
    if option is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # JSON has one number type: 1e6 is 1000000
        if isinstance(value, int) and not isinstance(value, bool):
            if not -(2**63) <= value < 2**63:  # JAX and the database take 64 bits
                raise ValueError("must be a 64-bit integer")
            return value
        raise TypeError(f"must be an integer, got {value!r}")
    if option is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                number = float(value)  # an int past 1e308 raises OverflowError
            except OverflowError:
                number = math.inf
            if not math.isfinite(number):
                raise ValueError(f"must be a finite number, got {number!r}")
            return number
        raise TypeError(f"must be a number, got {value!r}")
    if option is LoggingLevel:
        return _logging_level(value)
    if origin is tuple:
        if not isinstance(value, list):
            raise TypeError(f"must be a list, got {value!r}")
        item = typing.get_args(option)[0]
        return tuple(_coerce_one(item, v) for v in value)
    if origin is dict or option is dict:
        if not isinstance(value, dict):
            raise TypeError(f"must be an object, got {value!r}")
        return dict(value)
    raise TypeError(f"unsupported field type {option!r}")


def _logging_level(value: Any) -> LoggingLevel:
    """A LoggingLevel from an int, a name, ``"A|B"``, or a list of names."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0 or value & ~LoggingLevel.ALL.value & ~LoggingLevel.ROLLOUT_OBS.value:
            raise ValueError(f"{value} is not a combination of LoggingLevel flags")
        return LoggingLevel(value)
    names = value.split("|") if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TypeError(
            "must be a LoggingLevel: an integer, names joined by '|', or a list of names, "
            f"got {value!r}"
        )
    level = LoggingLevel(0)
    for name in names:
        member = LoggingLevel.__members__.get(name.strip().upper())
        if member is None:
            known = ", ".join(LoggingLevel.__members__)
            raise ValueError(f"unknown LoggingLevel {name!r}; known: {known}")
        level |= member
    return level


def total_steps(config: TrainConfig | DistillationTrainConfig) -> int:
    total: int = algorithm_for(config).loop_config(config).total_steps
    return total
