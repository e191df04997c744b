"""Pytree rewards: one value head per stream, per-stream GAE and value losses, and the two
meanings of ``combine_advantages``, against numbers worked out by hand."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms.losses import policy_advantages
from nnx_ppo.algorithms.ppo import ppo_loss
from nnx_ppo.algorithms.training import check_compatible
from nnx_ppo.algorithms.types import LoggingLevel, Transition
from nnx_ppo.networks import factories
from nnx_ppo.networks.base import StatefulModule, zero_loss
from nnx_ppo.networks.types import StatefulOutput
from tests.algorithms.scripted import scripted_output


class TwoHeadScripted(StatefulModule):
    """Stateless: log-likelihood from obs[:, 0], the task value from obs[:, 1] and the
    energy value from obs[:, 2]."""

    def __call__(self, state: Any, obs: jax.Array, rollout_extras: Any = None) -> StatefulOutput:
        values = {"energy": obs[:, 2], "task": obs[:, 1]}
        out = scripted_output(obs[:, 0], values)
        return StatefulOutput(state, out, zero_loss(), {}, out.raw_actions)


def two_stream_rollout() -> Transition:
    # Two envs, one terminal step each. New log-likelihoods ln 1.5 and ln 0.5 (old 0), so
    # the ratios are 1.5 and 0.5. Values: task [0.5, 1.0], energy [0.0, -0.5].
    obs = jnp.array([[[np.log(1.5), 0.5, 0.0], [np.log(0.5), 1.0, -0.5]]], jnp.float32)
    zeros = jnp.zeros((1, 2))
    old = jax.tree.map(
        lambda x: x[None], scripted_output(jnp.zeros((2,)), {"energy": zeros[0], "task": zeros[0]})
    )
    return Transition(
        obs=obs,
        network_output=old,
        rewards={"energy": jnp.array([[-0.25, 0.5]]), "task": jnp.array([[1.0, 0.0]])},
        done=jnp.array([[True, True]]),
        truncated=jnp.array([[False, False]]),
        next_obs=jnp.zeros_like(obs),
        metrics={},
        rollout_extras=jnp.zeros((1, 2, 1)),
        bootstrap_values={"energy": zeros, "task": zeros},
    )


def loss_of(combine: bool, normalize: bool) -> dict[str, jax.Array]:
    _, metrics = ppo_loss(
        TwoHeadScripted(),
        (),
        two_stream_rollout(),
        clip_range=0.2,
        normalize_advantages=normalize,
        combine_advantages=combine,
        discounting_factor=0.9,
        gae_lambda=1.0,
        critic_loss_weight=1.0,
        logging_level=LoggingLevel.LOSSES,
    )
    return metrics


# Terminal steps: advantage = reward - value, target = reward.
#   task:   A = [1 - 0.5, 0 - 1]       = [0.5, -1.0]
#   energy: A = [-0.25 - 0, 0.5 + 0.5] = [-0.25, 1.0]
# Ratios 1.5 and 0.5, clipped to 1.2 and 0.8; a term is -mean(min(r * A, clip(r) * A)).
# critic: task 0.5 * mean(0.5^2, 1^2) = 0.3125; energy 0.5 * mean(0.25^2, 1^2) = 0.265625.
CRITIC = {"task": 0.3125, "energy": 0.265625}


@pytest.mark.parametrize(
    ("combine", "normalize", "actor"),
    [
        # One term per stream. task: min(0.75, 0.6) = 0.6, min(-0.5, -0.8) = -0.8 -> 0.1;
        # energy: min(-0.375, -0.3) = -0.375, min(0.5, 0.8) = 0.5 -> -0.0625. Sum 0.0375.
        (False, False, 0.0375),
        # One term of the sum [0.25, 0.0]: min(0.375, 0.3) = 0.3 and 0 -> -0.15.
        (True, False, -0.15),
        # Each stream standardized: task [1, -1] -> min(1.5, 1.2), min(-0.5, -0.8) -> -0.2;
        # energy (mean 0.375, std 0.625) [-1, 1] -> min(-1.5, -1.2), min(0.5, 0.8) -> 0.5.
        (False, True, 0.3),
        # The sum [0.25, 0] standardized is [1, -1]: as the task stream alone, -0.2.
        (True, True, -0.2),
    ],
)
def test_two_stream_loss_matches_hand_computation(combine, normalize, actor):
    metrics = loss_of(combine, normalize)
    np.testing.assert_allclose(metrics["losses/actor"], actor, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(metrics["losses/critic/task"], CRITIC["task"], rtol=1e-6)
    np.testing.assert_allclose(metrics["losses/critic/energy"], CRITIC["energy"], rtol=1e-6)
    np.testing.assert_allclose(metrics["losses/critic"], sum(CRITIC.values()), rtol=1e-6)
    if not combine:
        terms = {"task": 0.1, "energy": -0.0625} if not normalize else {"task": -0.2, "energy": 0.5}
        for name, value in terms.items():
            np.testing.assert_allclose(metrics[f"losses/actor/{name}"], value, rtol=1e-4)
    else:
        assert "losses/actor/task" not in metrics


def test_policy_advantages_name_their_terms():
    a = {"energy": jnp.array([[-0.25, 1.0]]), "task": jnp.array([[0.5, -1.0]])}
    combined = policy_advantages(a, normalize=False, combine_first=True)
    assert [name for name, _ in combined] == [""]
    np.testing.assert_allclose(combined[0][1], [[0.25, 0.0]])
    separate = policy_advantages(a, normalize=False, combine_first=False)
    assert [name for name, _ in separate] == ["energy", "task"]


def test_reward_scaling_scales_rewards_before_gae():
    # One stream, scale 2: rewards [1, 0] -> [2, 0]; values [0.5, 1.0] (terminal steps):
    #   A = [1.5, -1.0]; min(2.25, 1.8) = 1.8, min(-0.5, -0.8) = -0.8 -> actor -0.5;
    #   critic 0.5 * mean((0.5 - 2)^2, (1 - 0)^2) = 0.8125.
    rollout = two_stream_rollout()
    rollout = rollout.replace(
        rewards=rollout.rewards["task"],
        bootstrap_values=jnp.zeros((1, 2)),
        network_output=rollout.network_output.replace(value_estimates=jnp.zeros((1, 2))),
    )

    class OneHead(TwoHeadScripted):
        def __call__(self, state, obs, rollout_extras=None):
            out = scripted_output(obs[:, 0], obs[:, 1])
            return StatefulOutput(state, out, zero_loss(), {}, out.raw_actions)

    _, metrics = ppo_loss(
        OneHead(), (), rollout, 0.2, False, False, 0.9, 1.0, 1.0, LoggingLevel.LOSSES, 2.0
    )
    np.testing.assert_allclose(metrics["losses/actor"], -0.5, rtol=1e-5)
    np.testing.assert_allclose(metrics["losses/critic"], 0.8125, rtol=1e-6)


def test_point_reach_energy_splits_its_reward():
    env = envs.PointReachEnergy(energy_cost=0.1)
    state = env.reset(jax.random.key(0))
    assert set(state.reward) == {"energy", "task"}
    stepped = env.step(state, jnp.array([0.5, 2.0]))
    # Clipped action [0.5, 1.0]: energy -0.1 * (0.25 + 1) = -0.125.
    np.testing.assert_allclose(stepped.reward["energy"], -0.125, rtol=1e-6)
    plain = envs.PointReach().step(state.replace(reward=jnp.zeros(())), jnp.array([0.5, 2.0]))
    np.testing.assert_allclose(stepped.reward["task"], plain.reward, rtol=1e-6)
    assert envs.describe("PointReachEnergy")["reward_streams"] == ["energy", "task"]


def test_a_single_value_head_for_two_streams_is_refused_before_compiling():
    env = envs.load("PointReachEnergy")
    one_head = factories.make_mlp_actor_critic(
        env.observation_size, env.action_size, rngs=nnx.Rngs(0), critic_hidden_sizes=(8,)
    )
    with pytest.raises(ValueError, match=r"reward_streams=\('energy', 'task'\)"):
        check_compatible(env, one_head)
    two_heads = factories.make_mlp_actor_critic(
        env.observation_size,
        env.action_size,
        rngs=nnx.Rngs(0),
        critic_hidden_sizes=(8,),
        reward_streams=("energy", "task"),
    )
    check_compatible(env, two_heads)
    with pytest.raises(ValueError, match="reward_streams"):
        factories.make_mlp_actor_critic(6, 2, rngs=nnx.Rngs(0), reward_streams=("a", "a"))


def test_a_flat_action_network_on_a_dict_action_env_is_a_clear_error():
    class DictActions:
        action_size = {"arm": 2, "gripper": 1}  # noqa: RUF012

        def reset(self, rng):
            return envs.PointReach().reset(rng)

    with pytest.raises(ValueError, match=r"as a dict of heads .*PPOAdapter\(action=Map"):
        check_compatible(DictActions(), factories.make_mlp_actor_critic(6, 3, rngs=nnx.Rngs(0)))
