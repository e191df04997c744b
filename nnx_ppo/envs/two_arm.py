"""``TwoArmReach``: a built-in env with dict actions, one action head per arm."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from nnx_ppo.envs.point_reach import PointMasses
from nnx_ppo.envs.state import State

ARMS = ("left", "right")
"""The arms, which are also the action heads and the observation keys."""


@struct.dataclass
class TwoArmReachData:
    """Internal state of ``TwoArmReach``: per arm (the leading axis, in ``ARMS`` order)
    its position, velocity and target, each float32 ``[2, 2]``."""

    pos: jax.Array
    vel: jax.Array
    target: jax.Array


class TwoArmReach(PointMasses):
    """Two independent 2-D point arms, each pushed to its own random target.

    Each arm is a ``PointReach`` point mass in the square arena [-1, 1]^2, driven by its
    own action head: the action is a dict ``{"left": float32 [2], "right": float32 [2]}``
    of accelerations, ``vel <- (1 - damping) * vel + dt * 4 * action`` then ``pos <-
    clip(pos + dt * vel, -1, 1)`` (velocity components that hit a wall are zeroed). Start
    positions and targets are uniform in [-0.8, 0.8]^2, start velocities zero. The env
    never terminates on its own.

    Observation: ``{"left": float32 [6], "right": float32 [6]}``, each ``[pos (2), vel
    (2), target (2)]`` of that arm. Reward: the mean over the arms of ``exp(-distance /
    reward_scale)``, in (0, 1]. Metrics: ``distance/left``, ``distance/right`` and
    ``distance`` (their mean), after the step.

    With 100-step episodes a random policy scores about 8 per episode and a clipped PD
    controller on each arm about 94, as in ``PointReach``: a policy scores well only if
    each head steers its own arm.

    Args:
        dt: Time step in seconds, in (0, 1).
        damping: Fraction of velocity lost per step, in [0, 1).
        reward_scale: Distance at which an arm's reward has dropped to 1/e, positive.

    Raises:
        ValueError: If a field is out of range (the message names it).
    """

    def reset(self, rng: jax.Array) -> State:
        """Samples start positions and targets; returns the first state (reward 0.)."""
        pos, vel, target = self._spawn(rng, (len(ARMS), 2))
        data = TwoArmReachData(pos=pos, vel=vel, target=target)
        zero = jnp.zeros((), jnp.float32)
        return State(
            data=data,
            obs=self._observe(data),
            reward=zero,
            done=zero,
            metrics=self._metrics(data),
            info={},
        )

    def step(self, state: State, action: Any) -> State:
        """Integrates one step of both arms, each with its own head of ``action``."""
        data = state.data
        stacked = jnp.stack([jnp.asarray(action[arm], jnp.float32) for arm in ARMS])
        pos, vel = self._move(data.pos, data.vel, stacked)
        data = data.replace(pos=pos, vel=vel)
        distance = jnp.linalg.norm(pos - data.target, axis=-1)
        return state.replace(
            data=data,
            obs=self._observe(data),
            reward=jnp.mean(jnp.exp(-distance / self.reward_scale)),
            done=jnp.zeros((), jnp.float32),
            metrics=self._metrics(data),
        )

    def _observe(self, data: TwoArmReachData) -> dict[str, jax.Array]:
        return {
            arm: jnp.concatenate([data.pos[i], data.vel[i], data.target[i]])
            for i, arm in enumerate(ARMS)
        }

    def _metrics(self, data: TwoArmReachData) -> dict[str, jax.Array]:
        distance = jnp.linalg.norm(data.pos - data.target, axis=-1)
        per_arm = {f"distance/{arm}": distance[i] for i, arm in enumerate(ARMS)}
        return {"distance": jnp.mean(distance), **per_arm}

    @property
    def observation_size(self) -> dict[str, tuple[int, ...]]:
        """``{"left": (6,), "right": (6,)}``."""
        return {arm: (6,) for arm in ARMS}

    @property
    def action_size(self) -> dict[str, int]:
        """``{"left": 2, "right": 2}``: one 2-D acceleration per arm."""
        return {arm: 2 for arm in ARMS}

    @property
    def default_episode_length(self) -> int:
        """100 steps."""
        return 100
