"""Variational bottlenecks: KL and AR(1) penalties on known inputs, noise replayed from the
carry's keys."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from nnx_ppo.networks.variational import AR1VariationalBottleneck, VariationalBottleneck

# latent 2: mean [0.5, -1], log-std [0, ln 2] -> std [1, 2] (min_std 0).
X = jnp.array([[0.5, -1.0, 0.0, np.log(2.0)]])


def test_kl_term_matches_the_formula():
    vb = VariationalBottleneck(2, nnx.Rngs(0), kl_weight=0.5, min_std=0.0)
    out = vb(vb.initialize_state(1), X)
    # KL = 0.5 * sum(mean^2 + std^2 - 1 - 2 log std)
    #    = 0.5 * ((0.25 + 1 - 1 - 0) + (1 + 4 - 1 - 2 ln 2)) = 0.5 * 2.863706 = 1.431853
    np.testing.assert_allclose(out.metrics["kl"], [1.431853], rtol=1e-5)
    np.testing.assert_allclose(out.regularization_loss, 0.5 * 1.431853, rtol=1e-5)


def test_samples_come_from_the_carry_keys_so_a_replay_draws_the_same():
    vb = VariationalBottleneck(2, nnx.Rngs(0), min_std=0.0)
    start = vb.initialize_state(3)
    x = jnp.tile(X, (3, 1))
    first = vb(start, x)
    again = vb(start, x)
    np.testing.assert_array_equal(first.output, again.output)
    second = vb(first.next_state, x)
    assert not np.allclose(first.output, second.output)  # the keys moved on
    assert not np.allclose(first.output[0], first.output[1])  # per-env keys differ
    reset = vb.reset_state(first.next_state)
    np.testing.assert_array_equal(reset, vb.reset_state(first.next_state))
    assert not np.array_equal(reset, first.next_state)


def test_eval_mode_outputs_the_mean():
    vb = VariationalBottleneck(2, nnx.Rngs(0))
    vb.eval()
    np.testing.assert_allclose(vb(vb.initialize_state(1), X).output, [[0.5, -1.0]])


def test_ar1_penalty_from_the_second_step_and_cleared_by_reset():
    ar = AR1VariationalBottleneck(2, nnx.Rngs(0), kl_weight=0.0, min_std=0.0, ar1_weight=2.0)
    ar.eval()  # z = mean: the penalty is known exactly
    x2 = jnp.array([[1.5, 1.0, 0.0, 0.0]])
    first = ar(ar.initialize_state(1), X)
    second = ar(first.next_state, x2)
    # no previous latent at the first step; then |[1.5, 1] - [0.5, -1]|^2 = 1 + 4 = 5
    np.testing.assert_allclose(first.metrics["ar1"], [0.0])
    np.testing.assert_allclose(second.metrics["ar1"], [5.0])
    np.testing.assert_allclose(second.regularization_loss, 2.0 * 5.0)
    after_reset = ar(ar.reset_state(second.next_state), X)
    np.testing.assert_allclose(after_reset.metrics["ar1"], [0.0])


def ar1_gradient_into_the_previous_input(backprop: bool) -> jax.Array:
    ar = AR1VariationalBottleneck(
        2, nnx.Rngs(0), kl_weight=0.0, ar1_weight=1.0, backprop_through_time=backprop
    )
    x2 = jnp.array([[1.5, 1.0, 0.0, 0.0]])

    def second_step_penalty(x1: jax.Array) -> jax.Array:
        first = ar(ar.initialize_state(1), x1)
        return ar(first.next_state, x2).regularization_loss

    return jax.grad(second_step_penalty)(X)


def test_backprop_through_time_false_stops_the_gradient_into_the_previous_latent():
    assert float(jnp.abs(ar1_gradient_into_the_previous_input(True)).sum()) > 0.1
    np.testing.assert_array_equal(ar1_gradient_into_the_previous_input(False), 0.0)
