"""PPOAdapter: ports packed into the trainer's PPONetworkOutput."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo.networks.adapter import PPOAdapter
from nnx_ppo.networks.containers import Parallel, Sequential
from nnx_ppo.networks.feedforward import Dense
from nnx_ppo.networks.normalizer import Normalizer
from nnx_ppo.networks.samplers import normal_log_prob, tanh_log_det_jacobian
from nnx_ppo.networks.sampling_layers import NormalTanhSampler
from nnx_ppo.networks.types import PPONetworkOutput
from nnx_ppo.networks.utils import Filter, Map, Scale


def adapter(value=None, action=None):
    rngs = nnx.Rngs(0)
    action = action or Sequential([Dense(3, 4, rngs), NormalTanhSampler(rngs, 0.01)])
    return PPOAdapter(action=action, value=value or Dense(3, 1, rngs))


def test_single_head_packs_arrays_and_squeezes_the_value():
    net = adapter()
    out = net(net.initialize_state(5), jnp.ones((5, 3)))
    o = out.output
    assert isinstance(o, PPONetworkOutput)
    assert o.actions.shape == o.raw_actions.shape == (5, 2)
    assert o.loglikelihoods.shape == (5,) and o.value_estimates.shape == (5,)
    np.testing.assert_allclose(o.actions, jnp.tanh(o.raw_actions), rtol=1e-6)
    assert set(o.distribution_params) == {"loc", "scale"}
    assert {"entropy", "action_std"} <= set(o.metrics)
    np.testing.assert_allclose(o.regularization_loss, out.regularization_loss)


def test_replaying_the_extras_rescores_the_same_actions():
    net = adapter()
    x = jnp.ones((5, 3))
    first = net(net.initialize_state(5), x)
    replay = net(net.initialize_state(5), x, first.rollout_extras)
    np.testing.assert_array_equal(replay.output.actions, first.output.actions)
    np.testing.assert_allclose(replay.output.loglikelihoods, first.output.loglikelihoods, rtol=1e-6)


def test_a_value_dict_gives_one_value_per_stream():
    rngs = nnx.Rngs(1)
    net = adapter(value=Parallel(task=Dense(3, 1, rngs), energy=Scale(1.0)))
    values = net(net.initialize_state(2), jnp.ones((2, 3))).output.value_estimates
    assert values["task"].shape == (2,)
    assert values["energy"].shape == (2, 3)  # not a trailing [B, 1]: left as it is


def test_several_heads_give_dict_actions_and_the_joint_log_likelihood():
    rngs = nnx.Rngs(2)
    heads = Sequential(
        [
            Parallel(left=Dense(3, 2, rngs), right=Dense(3, 4, rngs)),
            Map(left=NormalTanhSampler(rngs, 0.0), right=NormalTanhSampler(rngs, 0.0)),
        ]
    )
    net = adapter(action=heads)
    o = net(net.initialize_state(2), jnp.ones((2, 3))).output
    assert o.actions["left"].shape == (2, 1) and o.actions["right"].shape == (2, 2)
    assert o.distribution_params["loc"]["right"].shape == (2, 2)
    # Independent heads: log p(a_left, a_right) = log p(a_left) + log p(a_right), each the
    # normal's log-density of the raw action minus the tanh log-Jacobian.
    loc, scale = o.distribution_params["loc"], o.distribution_params["scale"]
    per_head = [
        normal_log_prob(o.raw_actions[h], loc[h], scale[h])
        - tanh_log_det_jacobian(o.raw_actions[h])
        for h in ("left", "right")
    ]
    np.testing.assert_allclose(o.loglikelihoods, per_head[0] + per_head[1], rtol=1e-5)


def test_one_head_in_a_map_is_the_plain_action():
    rngs = nnx.Rngs(3)
    net = adapter(
        action=Sequential([Filter({"arm": lambda x: x}), Map(arm=NormalTanhSampler(rngs, 0.0))]),
        value=Dense(4, 1, rngs),
    )
    o = net(net.initialize_state(2), jnp.zeros((2, 4))).output
    assert o.actions.shape == (2, 2) and o.loglikelihoods.shape == (2,)


def test_an_action_port_without_a_sampler_is_refused():
    net = adapter(action=Dense(3, 2, nnx.Rngs(0)))
    with pytest.raises(ValueError, match="action port must output a sampler dict"):
        net(net.initialize_state(1), jnp.ones((1, 3)))


def test_statistics_reach_normalizers_in_either_port():
    rngs = nnx.Rngs(0)
    net = PPOAdapter(
        action=Sequential([Normalizer(3), Dense(3, 2, rngs), NormalTanhSampler(rngs, 0.0)]),
        value=Sequential([Filter({"x": lambda x: x * 2.0}), Normalizer(shape={"x": 3})]),
    )
    net.update_statistics(jnp.full((2, 4, 3), 1.5))
    np.testing.assert_allclose(net.action.layers[0].mean[...], 1.5)
    np.testing.assert_allclose(net.value.layers[1].mean[...], 3.0)
