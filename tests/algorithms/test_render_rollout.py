"""``eval_rollout_for_render_scan`` and ``unstack_trajectory``, checked against a plain loop."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest
from flax import nnx

from nnx_ppo.algorithms.render_rollout import (
    SlimData,
    SlimState,
    eval_rollout_for_render_scan,
    unstack_trajectory,
)
from nnx_ppo.envs import load
from nnx_ppo.networks.factories import make_mlp_actor_critic


def small_net(obs_size: int, action_size: int):
    return make_mlp_actor_critic(
        obs_size, action_size, rngs=nnx.Rngs(0), actor_hidden_sizes=(8,), critic_hidden_sizes=(8,)
    )


def jitted_rollout(env, net, max_episode_length: int, key: jax.Array):
    rollout = functools.partial(eval_rollout_for_render_scan, env, net, max_episode_length)
    return jax.jit(rollout)(key)


def loop_rewards(env, net, n_steps: int, key: jax.Array) -> tuple[list[float], list[float]]:
    """Rewards and dones of a deterministic episode, stepped in a plain Python loop."""
    policy = nnx.clone(net)
    policy.eval()
    key_reset, _ = jax.random.split(key)
    env_state = env.reset(key_reset)
    network_state = policy.initialize_state(1)
    rewards, dones = [], []
    for _ in range(n_steps):
        out = policy(network_state, env_state.obs[None])
        network_state = out.next_state
        env_state = env.step(env_state, out.output.actions[0])
        rewards.append(float(env_state.reward))
        dones.append(float(env_state.done))
    return rewards, dones


@pytest.mark.parametrize(
    ("episode_length", "max_episode_length"),
    [
        (5, 8),  # done after 5 steps: frames = reset + 5 steps = 6, reward of steps 1..5
        (20, 4),  # never done within the scan: frames = 4 stacked + the final state = 5
    ],
)
def test_total_reward_and_trajectory_match_a_plain_loop(episode_length, max_episode_length):
    env = load("PointReach", {"episode_length": episode_length})
    net = small_net(6, 2)
    key = jax.random.key(7)
    stacked, final, total_reward = jitted_rollout(env, net, max_episode_length, key)
    rewards, dones = loop_rewards(env, net, max_episode_length, key)
    n_live = min(episode_length, max_episode_length)
    assert all(d == 0.0 for d in dones[: n_live - 1])
    np.testing.assert_allclose(total_reward, sum(rewards[:n_live]), rtol=1e-5)
    assert np.shape(stacked.done) == (max_episode_length,)
    trajectory = unstack_trajectory(stacked, final, max_episode_length)
    assert len(trajectory) == n_live + 1
    assert all(isinstance(s, SlimState) and isinstance(s.data, SlimData) for s in trajectory)
    steps = [float(s.info["steps"]) for s in trajectory]
    assert steps == list(range(n_live + 1))  # one state per step, starting at the reset
    assert [float(s.done) for s in trajectory[:-1]] == [0.0] * n_live
    assert float(final.info["steps"]) == n_live  # frozen at the first done state
    assert float(trajectory[-1].done) == (1.0 if episode_length <= max_episode_length else 0.0)


def test_caller_network_is_left_in_training_mode():
    env = load("PointReach", {"episode_length": 3})
    net = small_net(6, 2)
    graphdef = nnx.graphdef(net)
    eval_rollout_for_render_scan(env, net, 3, jax.random.key(0))
    assert not net.layers[-1].action.layers[-1].deterministic  # the sampler
    assert nnx.graphdef(net) == graphdef


@pytest.mark.parametrize("bad", [0, 2.5, True])
def test_invalid_length_raises(bad):
    env, net = load("PointReach"), small_net(6, 2)
    with pytest.raises(ValueError, match="max_episode_length"):
        eval_rollout_for_render_scan(env, net, bad, jax.random.key(0))


def test_unstack_stops_after_the_first_done_state():
    def slim(done, steps):
        data = SlimData(np.asarray(steps, np.float32)[..., None], None, None, None, None, None)
        return SlimState(data, np.asarray(done, np.float32), {"steps": np.asarray(steps)}, {})

    stacked = slim([0, 0, 1, 1], [0, 1, 2, 2])
    trajectory = unstack_trajectory(stacked, slim(1, 2), 4)
    assert [int(s.info["steps"]) for s in trajectory] == [0, 1, 2]
    # Never done: every stacked state, then the final one.
    trajectory = unstack_trajectory(slim([0, 0, 0], [0, 1, 2]), slim(0, 3), 3)
    assert [int(s.info["steps"]) for s in trajectory] == [0, 1, 2, 3]
    assert trajectory[-1].data.qpos.shape == (1,)


@pytest.mark.slow  # ~25 s with a cold compilation cache (MJX compile), ~11 s warm
def test_render_cartpole_frames():
    env = load("CartpoleBalance", {"episode_length": 2})
    net = small_net(env.observation_size, env.action_size)
    key = jax.random.key(0)
    stacked, final, _ = jitted_rollout(env, net, 3, key)
    trajectory = unstack_trajectory(stacked, final, 3)
    assert len(trajectory) == 3  # reset, step 1, step 2 (done: the episode length)
    frames = env.render(trajectory, height=64, width=64)
    assert len(frames) == 3
    assert all(f.shape == (64, 64, 3) and f.dtype == np.uint8 for f in frames)
    assert all(f.std() > 0 for f in frames)  # a scene, not a blank image
