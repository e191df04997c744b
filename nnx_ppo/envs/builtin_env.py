"""``BuiltinEnv``: the base class of the pure-JAX built-in envs, and the checks of their
constructor arguments."""

from __future__ import annotations

import abc
from typing import Any

import jax

from nnx_ppo.envs.state import State


def _require_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def _require_float(
    name: str, value: Any, low: float, high: float, *, low_inclusive: bool = False
) -> float:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    above = is_number and (value >= low if low_inclusive else value > low)
    if not (above and value < high):
        interval = f"{'[' if low_inclusive else '('}{low}, {high})"
        raise ValueError(f"{name} must be a number in {interval}, got {value!r}")
    return float(value)


class BuiltinEnv(abc.ABC):
    """Base class of the built-in envs: the ``MjxEnv`` interface plus a default horizon."""

    @abc.abstractmethod
    def reset(self, rng: jax.Array) -> State:
        """Starts a new episode from PRNG key ``rng``."""

    @abc.abstractmethod
    def step(self, state: State, action: jax.Array) -> State:
        """Advances one step with ``action`` (float32 ``[action_size]``)."""

    @property
    @abc.abstractmethod
    def observation_size(self) -> int | dict[str, tuple[int, ...]]:
        """Size of the flat observation, or a dict of shapes for dict observations."""

    @property
    @abc.abstractmethod
    def action_size(self) -> int | dict[str, int]:
        """Size of the action vector, or ``{head: size}`` for dict actions (one array per
        action head, ``TwoArmReach``)."""

    @property
    @abc.abstractmethod
    def default_episode_length(self) -> int:
        """Episode length that ``nnx_ppo.envs.load`` uses unless overridden."""

    @property
    def unwrapped(self) -> BuiltinEnv:
        """This env (the innermost env below any wrapper)."""
        return self
