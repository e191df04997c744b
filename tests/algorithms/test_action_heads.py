"""Several action heads: the per-head sums and checks of ``action_heads`` on known inputs,
and the adapter's per-head entropy metrics."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo.algorithms import action_heads as H
from nnx_ppo.algorithms.distillation_losses import gaussian_kl
from nnx_ppo.networks.adapter import PPOAdapter
from nnx_ppo.networks.containers import Parallel, Sequential
from nnx_ppo.networks.feedforward import Dense
from nnx_ppo.networks.samplers import squashed_entropy
from nnx_ppo.networks.sampling_layers import NormalTanhSampler
from nnx_ppo.networks.utils import Map


def test_sum_over_heads_of_a_plain_array_is_the_function_itself():
    x = jnp.asarray([[1.0, 2.0], [3.0, 4.0]])
    out = H.sum_over_heads(lambda a: jnp.sum(a, axis=-1), x)
    np.testing.assert_array_equal(out, [3.0, 7.0])


def test_the_kl_of_independent_heads_is_the_sum_of_the_heads_kls():
    # Head "a" (one dim): KL(N(0, 1) || N(1, 1)) = (0 - 1)^2 / 2 = 0.5.
    # Head "b" (two dims): KL(N(0, 1) || N(0, 2)) per dim = log 2 + 1 / 8 - 1/2, twice.
    one, zero = jnp.ones((1, 1)), jnp.zeros((1, 1))
    teacher_loc = {"a": zero, "b": jnp.zeros((1, 2))}
    teacher_scale = {"a": one, "b": jnp.ones((1, 2))}
    student_loc = {"a": one, "b": jnp.zeros((1, 2))}
    student_scale = {"a": one, "b": 2.0 * jnp.ones((1, 2))}
    kl = H.sum_over_heads(gaussian_kl, teacher_loc, teacher_scale, student_loc, student_scale)
    expected = 0.5 + 2 * (math.log(2.0) + 1.0 / 8.0 - 0.5)
    np.testing.assert_allclose(kl, [expected], rtol=1e-6)
    per_head = H.map_heads(gaussian_kl, teacher_loc, teacher_scale, student_loc, student_scale)
    np.testing.assert_allclose(per_head["a"], [0.5], rtol=1e-6)


def test_heads_that_differ_are_named():
    with pytest.raises(ValueError, match=r"\['a', 'b'\] and \['a'\]"):
        H.sum_over_heads(lambda x, y: x + y, {"a": 1.0, "b": 2.0}, {"a": 1.0})


def test_the_mean_over_heads_weighs_every_dimension_alike():
    # 1 dim of 3.0 and 2 dims of 0.0: the mean over the 3 dims is 1.0, not (3 + 0) / 2.
    tree = {"a": jnp.full((1, 1), 3.0), "b": jnp.zeros((1, 2))}
    np.testing.assert_allclose(H.mean_over_heads(lambda x: x, tree), 1.0)
    assert float(H.mean_over_heads(lambda x: x, jnp.asarray([1.0, 2.0]))) == 1.5


def test_action_shape_and_structure_checks():
    assert H.action_shape(jnp.zeros((4, 3))) == 3
    assert H.action_shape({"l": jnp.zeros((4, 2)), "r": jnp.zeros((4, 1))}) == {"l": 2, "r": 1}
    H.check_action_structure({"l": 2, "r": 1}, {"r": 1, "l": 2})
    H.check_action_structure(3, 3)
    with pytest.raises(ValueError, match="have size 2, the env's 3"):
        H.check_action_structure(3, 2)
    with pytest.raises(ValueError, match=r"action heads are \['l', 'r'\], the network's \['l'\]"):
        H.check_action_structure({"l": 2, "r": 1}, {"l": 2})
    with pytest.raises(ValueError, match=r"'r': 2 \(the env's 1\)"):
        H.check_action_structure({"l": 2, "r": 1}, {"l": 2, "r": 2})
    with pytest.raises(
        ValueError, match="as one \\[3\\] array, but the network produces as a dict"
    ):
        H.check_action_structure(3, {"l": 3})


def two_head_adapter() -> PPOAdapter:
    rngs = nnx.Rngs(0)
    action = Sequential(
        [
            Parallel(left=Dense(3, 2, rngs), right=Dense(3, 4, rngs)),
            Map(left=NormalTanhSampler(rngs, 0.01), right=NormalTanhSampler(rngs, 0.01)),
        ]
    )
    return PPOAdapter(action=action, value=Dense(3, 1, rngs))


def test_the_adapter_reports_each_heads_entropy_and_their_sum():
    net = two_head_adapter()
    out = net(net.initialize_state(5), jnp.ones((5, 3)))
    o = out.output
    raw, loc, scale = o.raw_actions, o.distribution_params["loc"], o.distribution_params["scale"]
    left = squashed_entropy(raw["left"], loc["left"], scale["left"])
    right = squashed_entropy(raw["right"], loc["right"], scale["right"])
    np.testing.assert_allclose(o.metrics["entropy/left"], left, rtol=1e-6)
    np.testing.assert_allclose(o.metrics["entropy/right"], right, rtol=1e-6)
    # The joint entropy of independent heads is the sum (not the last head's, which is
    # what Map's merged metrics hold under "entropy").
    np.testing.assert_allclose(o.metrics["entropy"], left + right, rtol=1e-6)
    assert H.head_metrics(o.metrics, "entropy").keys() == {"left", "right"}
    # The entropy bonus adds up over the heads: -0.01 * (mean(left) + mean(right)).
    expected_reg = -0.01 * (jnp.mean(left) + jnp.mean(right))
    np.testing.assert_allclose(out.regularization_loss, expected_reg, rtol=1e-5)
    all_scales = jnp.concatenate([scale["left"], scale["right"]], axis=-1)
    np.testing.assert_allclose(o.metrics["action_std"], jnp.mean(all_scales, axis=-1), rtol=1e-6)
