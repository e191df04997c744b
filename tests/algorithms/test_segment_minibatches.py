"""``PPOConfig.minibatch_segment_length``: the rollout cut into segments that the minibatches
shuffle, as Brax shuffles its ``unroll_length`` segments (stateless networks only)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import ppo
from nnx_ppo.algorithms.config import PPOConfig, TrainConfig
from nnx_ppo.algorithms.step import new_training_state, ppo_iteration, rollout_segments
from nnx_ppo.networks.factories import make_lstm_actor_critic, make_mlp_actor_critic

N_ENVS = 4
ROLLOUT = 6


def test_segments_are_columns_in_env_order_within_each_segment_index():
    steps = jnp.arange(ROLLOUT)[:, None] * 10 + jnp.arange(N_ENVS)[None, :]  # t * 10 + env
    cut = rollout_segments({"x": steps, "per_step": jnp.arange(ROLLOUT)}, 3, N_ENVS)
    assert cut["x"].shape == (3, 2 * N_ENVS)
    for k in range(2):
        for env in range(N_ENVS):
            column = np.asarray(cut["x"][:, k * N_ENVS + env])
            np.testing.assert_array_equal(column, [(k * 3 + s) * 10 + env for s in range(3)])
    np.testing.assert_array_equal(cut["per_step"][:, N_ENVS + 1], [3, 4, 5])


def test_segments_keep_trailing_axes():
    obs = jnp.arange(ROLLOUT * N_ENVS * 5.0).reshape(ROLLOUT, N_ENVS, 5)
    cut = rollout_segments(obs, 2, N_ENVS)
    assert cut.shape == (2, 3 * N_ENVS, 5)
    np.testing.assert_array_equal(cut[1, 2 * N_ENVS + 3], obs[5, 3])


def _iteration(segment_length: int | None) -> tuple[dict, list[np.ndarray]]:
    env = envs.load("PointReach", {"episode_length": 5})
    networks = make_mlp_actor_critic(env.observation_size, env.action_size, [8], [8], nnx.Rngs(0))
    config = PPOConfig(
        n_envs=N_ENVS,
        rollout_length=ROLLOUT,
        n_epochs=2,
        n_minibatches=2,
        minibatch_segment_length=segment_length,
    )
    state = new_training_state(env, networks, N_ENVS, seed=3)
    state, metrics = ppo_iteration(env, state, config)
    params = [np.asarray(x) for x in jax.tree.leaves(nnx.state(state.networks, nnx.Param))]
    return {k: float(v) for k, v in metrics.items()}, params


def test_one_segment_a_rollout_is_the_whole_env_minibatch_exactly():
    whole_metrics, whole_params = _iteration(None)
    one_metrics, one_params = _iteration(ROLLOUT)
    assert one_metrics == whole_metrics
    for a, b in zip(whole_params, one_params, strict=True):
        np.testing.assert_array_equal(a, b)


def test_shorter_segments_train_differently_and_finitely():
    whole_metrics, whole_params = _iteration(None)
    cut_metrics, cut_params = _iteration(2)
    assert all(np.isfinite(v) for v in cut_metrics.values())
    assert cut_metrics["losses/actor"] != whole_metrics["losses/actor"]
    assert any(not np.array_equal(a, b) for a, b in zip(whole_params, cut_params, strict=True))


def test_the_segment_length_must_divide_the_rollout():
    with pytest.raises(ValueError, match=r"minibatch_segment_length must be a divisor of "):
        PPOConfig(rollout_length=20, minibatch_segment_length=6)
    with pytest.raises(ValueError, match=r"minibatch_segment_length must be a positive integer"):
        PPOConfig(rollout_length=20, minibatch_segment_length=0)


def test_a_recurrent_network_is_refused_before_anything_compiles():
    env = envs.load("PointReach", {"episode_length": 5})
    networks = make_lstm_actor_critic(
        env.observation_size,
        env.action_size,
        rngs=nnx.Rngs(0),
        lstm_size=4,
        actor_hidden_sizes=(8,),
        critic_hidden_sizes=(8,),
    )
    config = TrainConfig(
        ppo=PPOConfig(n_envs=N_ENVS, rollout_length=ROLLOUT, minibatch_segment_length=3)
    )
    with pytest.raises(ValueError, match="needs a stateless network"):
        ppo.train_ppo(env, networks, config, total_steps=N_ENVS * ROLLOUT)
