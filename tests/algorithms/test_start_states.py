"""Envs that end during a rollout restart from start states reset once a rollout, at its
start (``rollout_start_states``), and not from a reset inside the step: compiling the env's
reset in the step was most of the training program's compile (``bench/RESULTS.md``,
"Start-up"). Each restart is a fresh reset of the env, as before, drawn from other keys."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import rollout
from nnx_ppo.algorithms.config import DistillationConfig, PPOConfig
from nnx_ppo.algorithms.distillation_step import distillation_iteration, new_distillation_state
from nnx_ppo.algorithms.step import new_training_state, ppo_iteration
from nnx_ppo.networks.factories import make_mlp_actor_critic
from tests.algorithms.test_reset_done import done_masks, raw

N_ENVS = 8
CONFIG = PPOConfig(n_envs=N_ENVS, rollout_length=6, n_epochs=1, n_minibatches=2)


class CountingEnv:
    """``env`` with a ``reset`` that counts its calls (traced or run)."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.resets = 0

    def reset(self, key: jax.Array) -> Any:
        self.resets += 1
        return self.env.reset(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)


def short_env(episode_length: int = 4) -> Any:
    return envs.load("PointReach", {"episode_length": episode_length})


def networks_for(env: Any, seed: int = 0) -> Any:
    return make_mlp_actor_critic(env.observation_size, env.action_size, [8], [8], nnx.Rngs(seed))


def leaves(tree: Any) -> list[np.ndarray]:
    return [raw(x) for x in jax.tree.leaves(tree)]


@pytest.mark.parametrize("n_envs", [17, 40])  # done_masks: none, 1, 3, 16 (a round), 17, all
def test_restart_done_puts_back_only_the_ended_envs(n_envs):
    env = short_env()
    state = new_training_state(env, networks_for(env), n_envs, seed=0)
    starts = rollout.rollout_start_states(env, state.env_states, jax.random.key(7))
    stepped = jax.vmap(env.step)(state.env_states, jnp.full((n_envs, env.action_size), 0.7))
    for name, mask in done_masks(n_envs).items():
        restarted = jax.jit(rollout.restart_done)(stepped, jnp.asarray(mask), starts)
        for new, before, start in zip(
            leaves(restarted), leaves(stepped), leaves(starts), strict=True
        ):
            np.testing.assert_array_equal(new[mask], start[mask], err_msg=name)
            np.testing.assert_array_equal(new[~mask], before[~mask], err_msg=name)


def test_start_states_are_resets_from_the_rollouts_key():
    env = short_env()
    state = new_training_state(env, networks_for(env), N_ENVS, seed=1)
    key = jax.random.key(3)
    starts = rollout.rollout_start_states(env, state.env_states, key)
    resets = rollout.reset_envs(env, jax.random.split(key, N_ENVS))
    for got, want in zip(leaves(starts), leaves(resets), strict=True):
        np.testing.assert_array_equal(got, want)


def test_the_rollout_traces_no_reset_and_the_iteration_one():
    env = CountingEnv(short_env())
    state = new_training_state(env, networks_for(env), N_ENVS, seed=1)
    assert env.resets == 1  # the first reset, vmapped once
    starts = rollout.rollout_start_states(env, state.env_states, jax.random.key(0))
    assert env.resets == 2

    def unroll(s: Any) -> Any:
        return rollout.unroll_env(
            env, s.env_states, s.networks, s.network_states, 6, s.rng_key, starts
        )

    jax.jit(unroll)(state)
    assert env.resets == 2  # the step restarts ended envs from ``starts``
    new_state, _ = jax.jit(lambda s: ppo_iteration(env, s, CONFIG))(state)
    assert env.resets == 3  # the start states, once an iteration
    # Four-step episodes in a six-step rollout: every env ended within it and restarted.
    assert int(np.max(np.asarray(new_state.env_states.info["steps"]))) < 4


def test_ended_episodes_restart_from_the_start_states():
    env = short_env()
    state = new_training_state(env, networks_for(env), N_ENVS, seed=2, stagger_episodes=False)
    starts = rollout.rollout_start_states(env, state.env_states, jax.random.key(5))
    _, _, transitions = rollout.unroll_env(
        env, state.env_states, state.networks, state.network_states, 6, state.rng_key, starts
    )
    done = np.asarray(transitions.done)
    assert done[3].all() and not done[:3].any()  # four-step episodes, unstaggered
    np.testing.assert_array_equal(transitions.obs[4], starts.obs)  # the step after the end


def test_distillation_restarts_from_start_states_made_once_an_iteration():
    env = CountingEnv(short_env())
    student, teacher = networks_for(env, seed=0), networks_for(env, seed=1)
    state = new_distillation_state(env, student, teacher, N_ENVS, seed=3)
    assert env.resets == 1
    config = DistillationConfig(n_envs=N_ENVS, rollout_length=6, n_epochs=1, n_minibatches=2)
    new_state, metrics = jax.jit(lambda s: distillation_iteration(env, teacher, s, config))(state)
    assert env.resets == 2  # the start states, once an iteration: none in the step
    assert metrics and all(np.isfinite(np.asarray(v)).all() for v in metrics.values())
    # Four-step episodes in a six-step rollout: every env ended within it and restarted.
    assert int(np.max(np.asarray(new_state.env_states.info["steps"]))) < 4
