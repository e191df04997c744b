"""Pure-JAX built-in environments: tiny, fast to jit, for tests and demos.

Every env here is a single unbatched environment with the MuJoCo Playground ``MjxEnv``
interface (``reset(rng) -> State``, ``step(state, action) -> State``, ``observation_size``,
``action_size``). Actions are float32 ``[action_size]`` in [-1, 1] (larger values are
clipped); ``two_arm.TwoArmReach`` takes a dict of them, one per action head. No env
resets itself and none has a time limit of its own: wrap it in ``EpisodeWrapper``
(``nnx_ppo.envs.load`` does) for that.
"""

from __future__ import annotations

import abc
import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

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


@struct.dataclass
class PointReachData:
    """Internal state of ``PointReach``: position, velocity and target, each float32 ``[2]``."""

    pos: jax.Array
    vel: jax.Array
    target: jax.Array


class PointReach(BuiltinEnv):
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

    _ACCELERATION = 4.0
    _SPAWN_RANGE = 0.8

    def __init__(self, *, dt: float = 0.1, damping: float = 0.2, reward_scale: float = 0.25):
        self.dt = _require_float("dt", dt, 0.0, 1.0)
        self.damping = _require_float("damping", damping, 0.0, 1.0, low_inclusive=True)
        self.reward_scale = _require_float("reward_scale", reward_scale, 0.0, math.inf)

    def reset(self, rng: jax.Array) -> State:
        """Samples start position and target; returns the first state (reward 0., done 0.)."""
        key_pos, key_target = jax.random.split(rng)
        r = self._SPAWN_RANGE
        data = PointReachData(
            pos=jax.random.uniform(key_pos, (2,), jnp.float32, -r, r),
            vel=jnp.zeros((2,), jnp.float32),
            target=jax.random.uniform(key_target, (2,), jnp.float32, -r, r),
        )
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
        accel = self._ACCELERATION * jnp.clip(action.astype(jnp.float32), -1.0, 1.0)
        vel = (1.0 - self.damping) * data.vel + self.dt * accel
        unclipped = data.pos + self.dt * vel
        pos = jnp.clip(unclipped, -1.0, 1.0)
        vel = jnp.where(pos != unclipped, 0.0, vel)
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


@struct.dataclass
class MemoryCueData:
    """Internal state of ``MemoryCue``.

    Attributes:
        cue: The episode's cue, float32 ``[]``, +1. or -1.
        t: Steps taken since reset, int32 ``[]``.
    """

    cue: jax.Array
    t: jax.Array


class MemoryCue(BuiltinEnv):
    """Remember a cue over a delay: a task that no memoryless policy can solve.

    Timeline (``t`` counts steps since reset, the observation at ``t`` is the one the policy
    acts on at step ``t``):

    * ``t = 0``: the observation shows the cue, +1 or -1 with equal probability.
    * ``t = 1 .. delay``: blank observations (cue channel 0).
    * ``t = delay + 1``: the decision step; the decision channel is 1 (cue channel still 0).
      The step taken here returns reward 1. if ``sign(action[0]) == cue`` else 0., and
      ``done = 1.``. Every other step returns reward 0.; stepping past the decision keeps
      ``done = 1.`` and reward 0.

    An episode has ``delay + 2`` steps. The decision observation is the same whatever the
    cue, so a memoryless policy's expected episode reward is 0.5; a recurrent policy that
    remembers the cue reaches 1.

    Observation: float32 ``[2]`` = ``[cue channel, decision channel]``. Action: float32
    ``[1]``. Metrics: none.

    Args:
        delay: Number of blank steps between the cue and the decision step, an int >= 0.

    Raises:
        ValueError: If ``delay`` is not an int >= 0.
    """

    def __init__(self, *, delay: int = 4):
        self.delay = _require_int("delay", delay, 0)

    @property
    def decision_step(self) -> int:
        """The value of ``t`` at which the action is scored: ``delay + 1``."""
        return self.delay + 1

    def reset(self, rng: jax.Array) -> State:
        """Draws the cue; the first observation shows it."""
        cue = jnp.where(jax.random.bernoulli(rng), 1.0, -1.0).astype(jnp.float32)
        data = MemoryCueData(cue=cue, t=jnp.zeros((), jnp.int32))
        zero = jnp.zeros((), jnp.float32)
        return State(data=data, obs=self._observe(data), reward=zero, done=zero)

    def step(self, state: State, action: jax.Array) -> State:
        """Scores ``action[0]`` at the decision step and ends the episode there."""
        data = state.data
        at_decision = data.t == self.decision_step
        correct = jnp.sign(action[0]).astype(jnp.float32) == data.cue
        reward = jnp.where(at_decision & correct, 1.0, 0.0).astype(jnp.float32)
        done = (data.t >= self.decision_step).astype(jnp.float32)
        data = data.replace(t=data.t + 1)
        return state.replace(data=data, obs=self._observe(data), reward=reward, done=done)

    def _observe(self, data: MemoryCueData) -> jax.Array:
        cue_channel = jnp.where(data.t == 0, data.cue, 0.0)
        decision_channel = jnp.where(data.t == self.decision_step, 1.0, 0.0)
        return jnp.stack([cue_channel, decision_channel]).astype(jnp.float32)

    @property
    def observation_size(self) -> int:
        """2: cue channel and decision channel."""
        return 2

    @property
    def action_size(self) -> int:
        """1: only the sign of the action matters, and only at the decision step."""
        return 1

    @property
    def default_episode_length(self) -> int:
        """``delay + 2``, the env's own episode length (it terminates at the decision)."""
        return self.delay + 2


def __getattr__(name: str) -> Any:
    # The registry of built-in envs moved to ``registry`` (it also lists envs of other
    # modules, which import this one); ``builtin.BUILTIN_ENVS`` still reads it.
    if name == "BUILTIN_ENVS":
        from nnx_ppo.envs.registry import BUILTIN_ENVS

        return BUILTIN_ENVS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
