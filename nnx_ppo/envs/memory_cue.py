"""``MemoryCue``: remember a cue over a delay (no memoryless policy solves it)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from nnx_ppo.envs.builtin_env import BuiltinEnv, _require_int
from nnx_ppo.envs.state import State


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
