"""The clipped PPO loss against numbers worked out by hand."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nnx_ppo.algorithms.ppo import ppo_loss
from nnx_ppo.algorithms.types import LoggingLevel, Transition
from tests.algorithms.scripted import ObsScripted, scripted_output


def one_step_rollout() -> Transition:
    # Two envs, one step each, both terminate. obs = (new log-likelihood, value).
    obs = jnp.array([[[jnp.log(1.5), 0.5], [jnp.log(0.5), 1.0]]], jnp.float32)  # [T=1, B=2, 2]
    old = jax.tree.map(lambda x: x[None], scripted_output(jnp.zeros((2,)), jnp.zeros((2,))))
    return Transition(
        obs=obs,
        network_output=old,
        rewards=jnp.array([[1.0, 0.0]]),
        done=jnp.array([[True, True]]),
        truncated=jnp.array([[False, False]]),
        next_obs=jnp.zeros_like(obs),
        metrics={},
        rollout_extras=jnp.zeros((1, 2, 1)),
        bootstrap_values=jnp.zeros((1, 2)),
    )


@pytest.mark.parametrize("normalize", [False, True])
def test_clipped_loss_matches_hand_computation(normalize):
    # Terminal steps, so advantage = reward - value and target = reward:
    #   env 0: A = 1 - 0.5 = 0.5, target 1;   env 1: A = 0 - 1 = -1, target 0.
    # Ratios exp(new - old): 1.5 and 0.5; clip range 0.2 -> clipped 1.2 and 0.8.
    # Unnormalized: env 0: min(1.5 * 0.5, 1.2 * 0.5) = 0.6; env 1: min(0.5 * -1, 0.8 * -1) = -0.8
    #   actor = -mean(0.6, -0.8) = 0.1
    # Normalized: A = (A - mean) / std = ([0.5, -1] + 0.25) / 0.75 = [1, -1]
    #   env 0: min(1.5, 1.2) = 1.2; env 1: min(-0.5, -0.8) = -0.8; actor = -mean = -0.2
    # critic = 0.5 * mean((0.5 - 1)^2, (1 - 0)^2) = 0.5 * 0.625 = 0.3125
    # total = actor + 0.5 * critic (critic_loss_weight 0.5) + 0 regularization
    total, metrics = ppo_loss(
        ObsScripted(),
        (),
        one_step_rollout(),
        clip_range=0.2,
        normalize_advantages=normalize,
        combine_advantages=False,
        discounting_factor=0.5,
        gae_lambda=1.0,
        critic_loss_weight=0.5,
        logging_level=LoggingLevel.LOSSES | LoggingLevel.ACTOR_EXTRA,
    )
    actor = -0.2 if normalize else 0.1
    np.testing.assert_allclose(metrics["losses/actor"], actor, rtol=1e-5)
    np.testing.assert_allclose(metrics["losses/critic"], 0.3125, rtol=1e-6)
    np.testing.assert_allclose(total, actor + 0.5 * 0.3125, rtol=1e-5)
    # Both ratios lie outside [0.8, 1.2].
    np.testing.assert_allclose(metrics["actor/clip_fraction"], 1.0)
