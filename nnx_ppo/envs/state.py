"""The state pytree that every built-in environment returns from ``reset`` and ``step``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax
from flax import struct


@struct.dataclass
class State:
    """State of one (unbatched) environment, field-compatible with ``mujoco_playground.State``.

    The trainer vmaps ``reset``/``step`` over environments, so inside a batch every leaf gains
    a leading ``[B]`` axis; the shapes below are for a single environment.

    Attributes:
        data: Env-internal pytree (positions, counters, ...); its layout belongs to the env.
        obs: Observation, a float32 array ``[obs_size]`` or a dict of float32 arrays.
        reward: Reward of the transition that produced this state, float32 ``[]``, or a
            dict of such streams (``PointReachEnergy``).
        done: 1. if the episode ended with this transition, else 0.; float32 ``[]``.
        metrics: Per-step diagnostics, a dict of float32 ``[]`` arrays with keys fixed at reset.
        info: Extra per-env values (e.g. ``steps`` and ``truncated`` from ``EpisodeWrapper``).
    """

    data: Any
    obs: jax.Array | dict[str, jax.Array]
    reward: Any
    done: jax.Array
    metrics: dict[str, jax.Array] = struct.field(default_factory=dict)
    info: dict[str, Any] = struct.field(default_factory=dict)

    if TYPE_CHECKING:  # struct.dataclass adds it at run time

        def replace(self, **changes: Any) -> State: ...
