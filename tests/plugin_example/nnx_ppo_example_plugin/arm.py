"""``TwoLinkArm``: a planar two-link arm whose fingertip reaches for a random target.

Pure JAX, with nnx-ppo's env interface (``reset``, ``step``, ``observation_size``,
``action_size``). The action (float32 ``[2]``, clipped to [-1, 1]) is the joints' angular
acceleration; each link is 0.5 long, so targets lie within reach (radius 0.2 to 0.9).

Observation: float32 ``[8]`` = ``[cos q (2), sin q (2), dq (2), target - tip (2)]``.
Reward: ``exp(-distance / 0.1)`` in (0, 1]. Metrics: ``distance``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from nnx_ppo.envs import State

LINK = 0.5


def make_arm(*, dt: float = 0.05, break_in_step: bool = False) -> TwoLinkArm:
    """The entry point (``nnx_ppo.envs``: ``TwoLinkArm``): its keywords are the env's
    overrides. ``break_in_step`` makes ``step`` raise, as a buggy env would mid-run."""
    if not 0 < dt < 1:
        raise ValueError(f"dt must be in (0, 1), got {dt!r}")
    return TwoLinkArm(dt, break_in_step)


def tip(q: jax.Array) -> jax.Array:
    """The fingertip's position for joint angles ``q`` (``[2]``)."""
    elbow = LINK * jnp.stack([jnp.cos(q[0]), jnp.sin(q[0])])
    return elbow + LINK * jnp.stack([jnp.cos(q[0] + q[1]), jnp.sin(q[0] + q[1])])


class TwoLinkArm:
    observation_size = 8
    action_size = 2
    default_episode_length = 50

    def __init__(self, dt: float, break_in_step: bool):
        self.dt = dt
        self.break_in_step = break_in_step

    def reset(self, rng: jax.Array) -> State:
        key_q, key_radius, key_angle = jax.random.split(rng, 3)
        q = jax.random.uniform(key_q, (2,), jnp.float32, -jnp.pi, jnp.pi)
        radius = jax.random.uniform(key_radius, (), jnp.float32, 0.2, 0.9)
        angle = jax.random.uniform(key_angle, (), jnp.float32, -jnp.pi, jnp.pi)
        target = radius * jnp.stack([jnp.cos(angle), jnp.sin(angle)])
        data = {"q": q, "dq": jnp.zeros((2,), jnp.float32), "target": target}
        zero = jnp.zeros((), jnp.float32)
        obs, distance = self._observe(data)
        return State(data, obs, zero, zero, {"distance": distance}, {})

    def step(self, state: State, action: jax.Array) -> State:
        if self.break_in_step:
            raise RuntimeError("TwoLinkArm.step broke (break_in_step=True)")
        data = dict(state.data)
        accel = 10.0 * jnp.clip(action.astype(jnp.float32), -1.0, 1.0)
        data["dq"] = 0.9 * data["dq"] + self.dt * accel
        data["q"] = data["q"] + self.dt * data["dq"]
        obs, distance = self._observe(data)
        reward = jnp.exp(-distance / 0.1)
        done = jnp.zeros((), jnp.float32)
        return state.replace(
            data=data, obs=obs, reward=reward, done=done, metrics={"distance": distance}
        )

    def _observe(self, data: dict[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
        q, dq = data["q"], data["dq"]
        to_target = data["target"] - tip(q)
        obs = jnp.concatenate([jnp.cos(q), jnp.sin(q), dq, to_target])
        return obs, jnp.linalg.norm(to_target)
