"""End-to-end: PPO learns. An MLP solves a control task; only an LSTM solves the memory task."""

from __future__ import annotations

import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import config as C
from nnx_ppo.algorithms.ppo import train_ppo
from nnx_ppo.networks import factories

pytestmark = pytest.mark.slow


def train(env, networks, *, total_steps, n_envs, rollout_length, learning_rate, eval_length):
    config = C.TrainConfig(
        ppo=C.PPOConfig(
            n_envs=n_envs,
            rollout_length=rollout_length,
            total_steps=total_steps,
            learning_rate=learning_rate,
            n_minibatches=4,
            n_epochs=4,
        ),
        eval=C.EvalConfig(every_steps=total_steps, n_envs=128, max_episode_length=eval_length),
        seed=0,
    )
    return train_ppo(env, networks, config).eval_history[-1]["eval/episode_reward"]


def small_mlp(env, **fields):
    return factories.make_mlp_actor_critic(
        env.observation_size,
        env.action_size,
        rngs=nnx.Rngs(0),
        actor_hidden_sizes=(32, 32),
        critic_hidden_sizes=(32, 32),
        **fields,
    )


def train_point_reach(env, total_steps):
    return train(
        env,
        small_mlp(env),
        total_steps=total_steps,
        n_envs=64,
        rollout_length=20,
        learning_rate=1e-3,
        eval_length=100,
    )


def test_mlp_solves_point_reach():
    reward = train_point_reach(envs.load("PointReach"), 200_000)
    # A random policy scores about 8 of 100 and a hand-written controller about 94.
    assert reward > 70.0


def memory_task_reward(kind: str) -> float:
    env = envs.load("MemoryCue", {"delay": 3})
    make = factories.make_lstm_actor_critic if kind == "lstm" else factories.make_mlp_actor_critic
    sizes = {"lstm_size": 32} if kind == "lstm" else {}
    networks = make(
        env.observation_size,
        env.action_size,
        rngs=nnx.Rngs(0),
        actor_hidden_sizes=(32,),
        critic_hidden_sizes=(32,),
        **sizes,
    )
    return train(
        env,
        networks,
        total_steps=150_000,
        n_envs=128,
        rollout_length=10,
        learning_rate=3e-3,
        eval_length=10,
    )


def test_lstm_solves_memory_task_that_mlp_cannot():
    # A memoryless policy sees the same decision observation whatever the cue: it is right
    # half of the time (expected reward 0.5). Remembering the cue gives 1.
    lstm = memory_task_reward("lstm")
    mlp = memory_task_reward("mlp")
    assert lstm >= 0.95
    assert 0.3 <= mlp <= 0.7


@pytest.mark.parametrize(
    ("combine", "normalize"),
    # Streams standardized one by one weigh the same whatever their scale: with the energy
    # stream as heavy as the task, standing still is about as good as reaching (it scores
    # ~11 on the task). Unnormalized terms keep the streams' own scales.
    [(True, True), (False, False)],
)
def test_mlp_learns_point_reach_with_two_reward_streams(combine, normalize):
    env = envs.load("PointReachEnergy")
    networks = small_mlp(env, reward_streams=("energy", "task"))
    config = C.TrainConfig(
        ppo=C.PPOConfig(
            n_envs=64,
            rollout_length=20,
            total_steps=150_000,
            learning_rate=1e-3,
            combine_advantages=combine,
            normalize_advantages=normalize,
        ),
        eval=C.EvalConfig(every_steps=150_000, n_envs=128, max_episode_length=100),
        seed=0,
    )
    final = train_ppo(env, networks, config).eval_history[-1]
    # Random actions score about 8 on the task stream (and about -6.7 on energy: 100 steps
    # of -0.1 * E|a|^2 with tanh-Gaussian actions); the total is their sum.
    assert final["eval/episode_reward/task"] > 60.0
    assert final["eval/episode_reward/energy"] > -10.0
    total = final["eval/episode_reward/task"] + final["eval/episode_reward/energy"]
    np.testing.assert_allclose(final["eval/episode_reward"], total, rtol=1e-5)


def test_mlp_solves_point_reach_with_dict_observations():
    assert train_point_reach(envs.load("PointReachDict"), 150_000) > 60.0
