"""``PointReach`` and its variants: a 2-D point pushed to a random target."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from nnx_ppo.envs.builtin_env import BuiltinEnv, _require_float
from nnx_ppo.envs.state import State


@struct.dataclass
class PointReachData:
    """Internal state of ``PointReach``: position, velocity and target, each float32 ``[2]``."""

    pos: jax.Array
    vel: jax.Array
    target: jax.Array


class PointMasses(BuiltinEnv):
    """The point masses of ``PointReach`` and ``TwoArmReach``: their fields (``dt``,
    ``damping``, ``reward_scale``, each checked), where they start and how they move."""

    _ACCELERATION = 4.0
    _SPAWN_RANGE = 0.8

    def __init__(self, *, dt: float = 0.1, damping: float = 0.2, reward_scale: float = 0.25):
        self.dt = _require_float("dt", dt, 0.0, 1.0)
        self.damping = _require_float("damping", damping, 0.0, 1.0, low_inclusive=True)
        self.reward_scale = _require_float("reward_scale", reward_scale, 0.0, math.inf)

    def _spawn(self, rng: jax.Array, shape: tuple[int, ...]) -> tuple[jax.Array, ...]:
        """``(pos, vel, target)`` of ``shape``: uniform positions and targets, at rest."""
        key_pos, key_target = jax.random.split(rng)
        r = self._SPAWN_RANGE
        return (
            jax.random.uniform(key_pos, shape, jnp.float32, -r, r),
            jnp.zeros(shape, jnp.float32),
            jax.random.uniform(key_target, shape, jnp.float32, -r, r),
        )

    def _move(self, pos: jax.Array, vel: jax.Array, action: jax.Array) -> tuple[jax.Array, ...]:
        """``(pos, vel)`` one step on, under the float32 ``action`` (clipped to [-1, 1]);
        a velocity component that hits a wall is zeroed."""
        accel = self._ACCELERATION * jnp.clip(action, -1.0, 1.0)
        vel = (1.0 - self.damping) * vel + self.dt * accel
        unclipped = pos + self.dt * vel
        pos = jnp.clip(unclipped, -1.0, 1.0)
        return pos, jnp.where(pos != unclipped, 0.0, vel)


class PointReach(PointMasses):
    """Push a 2-D point mass to a random target inside the square arena [-1, 1]^2.

    The action (float32 ``[2]``) is an acceleration: ``vel <- (1 - damping) * vel + dt *
    4 * action``, then ``pos <- clip(pos + dt * vel, -1, 1)`` (velocity components that hit a
    wall are zeroed). Start position and target are uniform in [-0.8, 0.8]^2, the start
    velocity is zero. The env never terminates on its own.

    Observation: float32 ``[6]`` = ``[pos (2), vel (2), target (2)]``.
    Reward: ``exp(-distance / reward_scale)`` in (0, 1], dense everywhere.
    Metrics: ``distance`` (to the target, after the step).

    With the defaults and 100-step episodes, a random policy (uniform or tanh-Gaussian
    actions) scores about 8 per episode, doing nothing about 10, and a clipped PD controller
    ``a = clip(10 * (target - pos) - 2 * vel)`` about 94 (the maximum is 100), so a small
    MLP policy has plenty of room to show learning.

    Args:
        dt: Time step in seconds, in (0, 1).
        damping: Fraction of velocity lost per step, in [0, 1).
        reward_scale: Distance at which the reward has dropped to 1/e, positive.

    Raises:
        ValueError: If a field is out of range (the message names it).
    """

    def reset(self, rng: jax.Array) -> State:
        """Samples start position and target; returns the first state (reward 0., done 0.)."""
        pos, vel, target = self._spawn(rng, (2,))
        data = PointReachData(pos=pos, vel=vel, target=target)
        zero = jnp.zeros((), jnp.float32)
        distance = jnp.linalg.norm(data.pos - data.target)
        return State(
            data=data,
            obs=self._observe(data),
            reward=zero,
            done=zero,
            metrics={"distance": distance},
            info={},
        )

    def step(self, state: State, action: jax.Array) -> State:
        """Integrates one step; reward ``exp(-distance / reward_scale)``, never done."""
        data = state.data
        pos, vel = self._move(data.pos, data.vel, action.astype(jnp.float32))
        data = data.replace(pos=pos, vel=vel)
        distance = jnp.linalg.norm(pos - data.target)
        return state.replace(
            data=data,
            obs=self._observe(data),
            reward=jnp.exp(-distance / self.reward_scale),
            done=jnp.zeros((), jnp.float32),
            metrics={"distance": distance},
        )

    def _observe(self, data: PointReachData) -> Any:
        return jnp.concatenate([data.pos, data.vel, data.target])

    @property
    def observation_size(self) -> int | dict[str, tuple[int, ...]]:
        """6: position, velocity and target, two coordinates each."""
        return 6

    @property
    def action_size(self) -> int:
        """2: acceleration along x and y."""
        return 2

    @property
    def default_episode_length(self) -> int:
        """100 steps."""
        return 100


class PointReachDict(PointReach):
    """``PointReach`` with dict observations, to exercise pytree observations.

    Observation: ``{"state": float32 [4] = [pos, vel], "target": float32 [2]}``. Dynamics,
    reward, metrics and arguments are those of ``PointReach``.
    """

    def _observe(self, data: PointReachData) -> Any:
        return {"state": jnp.concatenate([data.pos, data.vel]), "target": data.target}

    @property
    def observation_size(self) -> int | dict[str, tuple[int, ...]]:
        """``{"state": (4,), "target": (2,)}``."""
        return {"state": (4,), "target": (2,)}


class PointReachEnergy(PointReach):
    """``PointReach`` with two reward streams, to exercise pytree rewards.

    Reward: ``{"task": exp(-distance / reward_scale), "energy": -energy_cost * |a|^2}``,
    where ``a`` is the action after clipping to [-1, 1] (so ``energy`` is in
    ``[-2 * energy_cost, 0]``). Their sum is best served by reaching the target with
    small accelerations. Dynamics, observation, metrics and the other arguments are
    ``PointReach``'s; ``metrics`` also has ``energy`` (the stream's value).

    Args:
        energy_cost: Weight of the squared action norm, >= 0.
        **kwargs: ``PointReach``'s arguments.
    """

    def __init__(self, *, energy_cost: float = 0.1, **kwargs: Any):
        super().__init__(**kwargs)
        self.energy_cost = _require_float(
            "energy_cost", energy_cost, 0.0, math.inf, low_inclusive=True
        )

    def reset(self, rng: jax.Array) -> State:
        """``PointReach.reset`` with a zero reward in each stream."""
        state = super().reset(rng)
        zero = jnp.zeros((), jnp.float32)
        return state.replace(
            reward={"energy": zero, "task": zero}, metrics={**state.metrics, "energy": zero}
        )

    def step(self, state: State, action: jax.Array) -> State:
        """``PointReach.step``; the reward is split into ``task`` and ``energy``."""
        stepped = super().step(state.replace(reward=jnp.zeros((), jnp.float32)), action)
        clipped = jnp.clip(action.astype(jnp.float32), -1.0, 1.0)
        energy = -self.energy_cost * jnp.sum(jnp.square(clipped))
        return stepped.replace(
            reward={"energy": energy, "task": stepped.reward},
            metrics={**stepped.metrics, "energy": energy},
        )
