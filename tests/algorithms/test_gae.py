"""GAE: the scan implementation against a plain Python loop, and truncation bootstrapping."""

from __future__ import annotations

import numpy as np
import pytest

from nnx_ppo.algorithms.ppo import gae


def reference_gae(rewards, values, last_value, done, truncated, bootstrap, lam, gamma):
    """Textbook GAE, one env and one step at a time."""
    n_steps, n_envs = rewards.shape
    advantages = np.zeros_like(rewards)
    for b in range(n_envs):
        running = 0.0
        for t in reversed(range(n_steps)):
            if done[t, b] and truncated[t, b]:
                next_value, carry = bootstrap[t, b], 0.0
            elif done[t, b]:
                next_value, carry = 0.0, 0.0
            else:
                next_value = values[t + 1, b] if t + 1 < n_steps else last_value[b]
                carry = running
            delta = rewards[t, b] + gamma * next_value - values[t, b]
            running = delta + gamma * lam * carry
            advantages[t, b] = running
    return advantages


@pytest.mark.parametrize("lam,gamma", [(0.95, 0.99), (1.0, 0.9), (0.0, 0.97)])
def test_gae_matches_python_loop_with_terminations_and_truncations(lam, gamma):
    rng = np.random.default_rng(0)
    n_steps, n_envs = 12, 5
    rewards = rng.normal(size=(n_steps, n_envs)).astype(np.float32)
    values = rng.normal(size=(n_steps, n_envs)).astype(np.float32)
    last_value = rng.normal(size=(n_envs,)).astype(np.float32)
    bootstrap = rng.normal(size=(n_steps, n_envs)).astype(np.float32)
    done = rng.random((n_steps, n_envs)) < 0.25
    truncated = done & (rng.random((n_steps, n_envs)) < 0.5)
    assert done.any() and truncated.any() and (done & ~truncated).any()

    advantages, targets = gae(
        rewards, values, last_value, done, truncated, lam, gamma, bootstrap_values=bootstrap
    )
    expected = reference_gae(rewards, values, last_value, done, truncated, bootstrap, lam, gamma)
    np.testing.assert_allclose(advantages, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(targets, expected + values, rtol=1e-5, atol=1e-5)


def test_truncated_step_bootstraps_from_next_observation_value():
    # One env, two steps; the episode is cut by its time limit at step 1.
    # gamma = 0.5, lambda = 1. Values V(s0) = 1, V(s1) = 2; V(next obs at the cut) = 10.
    # Step 1: delta = r1 + gamma * 10 - V(s1) = 1 + 5 - 2 = 4 -> A1 = 4.
    # Step 0: delta = r0 + gamma * V(s1) - V(s0) = 1 + 1 - 1 = 1 -> A0 = 1 + 0.5 * 4 = 3.
    rewards = np.array([[1.0], [1.0]], np.float32)
    values = np.array([[1.0], [2.0]], np.float32)
    done = np.array([[False], [True]])
    truncated = np.array([[False], [True]])
    bootstrap = np.array([[0.0], [10.0]], np.float32)
    last_value = np.array([123.0], np.float32)  # belongs to the next episode: unused
    advantages, _ = gae(rewards, values, last_value, done, truncated, 1.0, 0.5, bootstrap)
    np.testing.assert_allclose(np.asarray(advantages)[:, 0], [3.0, 4.0])

    # The same cut treated as a termination would give A1 = 1 - 2 = -1.
    terminated, _ = gae(rewards, values, last_value, done, np.zeros_like(done), 1.0, 0.5, bootstrap)
    np.testing.assert_allclose(np.asarray(terminated)[:, 0], [1.0 + 0.5 * -1.0, -1.0])


def test_episode_boundary_stops_advantage_flow():
    # A termination at step 0 must keep step 1's large reward out of A0.
    rewards = np.array([[0.0], [100.0]], np.float32)
    values = np.zeros((2, 1), np.float32)
    done = np.array([[True], [False]])
    advantages, _ = gae(
        rewards, values, np.zeros(1, np.float32), done, np.zeros_like(done), 0.95, 0.99
    )
    assert float(advantages[0, 0]) == 0.0
    assert float(advantages[1, 0]) == 100.0
