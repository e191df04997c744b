"""Hand-scripted networks and envs whose outputs the tests can predict exactly."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from nnx_ppo.envs import State
from nnx_ppo.networks.base import StatefulModule, zero_loss
from nnx_ppo.networks.types import PPONetworkOutput, StatefulOutput


def scripted_output(loglik: jax.Array, value: jax.Array, action_size: int = 1) -> PPONetworkOutput:
    batch = loglik.shape[0]
    zeros = jnp.zeros((batch,), jnp.float32)
    return PPONetworkOutput(
        actions=jnp.zeros((batch, action_size), jnp.float32),
        raw_actions=jnp.zeros((batch, action_size), jnp.float32),
        loglikelihoods=loglik,
        value_estimates=value,
        regularization_loss=zero_loss(),
        metrics={"entropy": zeros, "action_std": zeros},
        distribution_params={},
    )


class ObsScripted(StatefulModule):
    """Stateless: reads its log-likelihood from obs[:, 0] and its value from obs[:, 1]."""

    def __call__(self, state: Any, obs: jax.Array, rollout_extras: Any = None) -> StatefulOutput:
        out = scripted_output(obs[:, 0], obs[:, 1])
        return StatefulOutput(state, out, zero_loss(), {}, out.raw_actions)


class StepCounter(StatefulModule):
    """Stateful: its value is the number of steps it has seen since its state was reset."""

    def initialize_state(self, batch_size: int) -> jax.Array:
        return jnp.zeros((batch_size,), jnp.float32)

    def __call__(self, state: jax.Array, obs: Any, rollout_extras: Any = None) -> StatefulOutput:
        count = state + 1.0
        out = scripted_output(jnp.zeros_like(count), count)
        return StatefulOutput(count, out, zero_loss(), {}, out.raw_actions)


class RandomLengthEnv:
    """Episodes of a random length in [2, 5]; reward 1 per step; observation is constant."""

    observation_size = 1
    action_size = 1

    def reset(self, rng: jax.Array) -> State:
        length = jax.random.randint(rng, (), 2, 6).astype(jnp.float32)
        return State(
            data={"left": length},
            obs=jnp.zeros((1,), jnp.float32),
            reward=jnp.zeros(()),
            done=jnp.zeros(()),
            metrics={},
            info={"truncated": jnp.zeros(())},
        )

    def step(self, state: State, action: jax.Array) -> State:
        left = state.data["left"] - 1.0
        return state.replace(
            data={"left": left}, reward=jnp.ones(()), done=(left <= 0).astype(jnp.float32)
        )


def expected_counts(done: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Steps seen since the last reset, counting the current one (a plain loop)."""
    counts = np.zeros(done.shape, np.float32)
    for b in range(done.shape[1]):
        count = start[b]
        for t in range(done.shape[0]):
            count += 1
            counts[t, b] = count
            if done[t, b]:
                count = 0
    return counts
