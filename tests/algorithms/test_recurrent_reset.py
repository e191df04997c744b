"""Recurrent state is reset exactly where an episode ended: in the rollout and in the replay."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from nnx_ppo.algorithms.losses import _replay
from nnx_ppo.algorithms.rollout import unroll_env
from tests.algorithms.scripted import RandomLengthEnv, StepCounter, expected_counts

N_ENVS, N_STEPS = 6, 15


def rollout(start_counts: np.ndarray):
    env = RandomLengthEnv()
    env_state = jax.vmap(env.reset)(jax.random.split(jax.random.key(3), N_ENVS))
    network = StepCounter()
    start = jnp.asarray(start_counts)
    _, end_state, data = unroll_env(env, env_state, network, start, N_STEPS, jax.random.key(4))
    return network, start, end_state, data


def test_rollout_resets_state_where_episodes_end():
    start = np.array([0, 3, 0, 7, 1, 0], np.float32)  # mid-episode states carried in
    _, _, end_state, data = rollout(start)
    done = np.asarray(data.done)
    assert done.sum() >= N_ENVS, "every env should finish an episode in 15 steps"
    assert len({tuple(np.flatnonzero(done[:, b])) for b in range(N_ENVS)}) > 1
    counts = expected_counts(done, start)
    np.testing.assert_array_equal(np.asarray(data.network_output.value_estimates), counts)
    # The carried state also restarts after a final-step termination.
    final = np.where(done[-1], 0.0, counts[-1])
    np.testing.assert_array_equal(np.asarray(end_state), final)


def test_loss_replay_resets_state_where_episodes_ended():
    start = np.array([2, 0, 5, 0, 0, 1], np.float32)
    network, start_state, _, data = rollout(start)
    replay = _replay(network, start_state, data)
    counts = expected_counts(np.asarray(data.done), start)
    np.testing.assert_array_equal(np.asarray(replay.values), counts)
    # The bootstrap value after the last step continues the last step's episode.
    np.testing.assert_array_equal(np.asarray(replay.last_value), counts[-1] + 1)
