"""Toolkit LSTM: (c, h) carry, reset to zeros or to the trained initial state."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from nnx_ppo.networks.recurrent import LSTM


def test_carry_is_c_h_and_the_output_is_h():
    lstm = LSTM(3, 4, nnx.Rngs(0))
    state = lstm.initialize_state(2)
    out = lstm(state, jnp.ones((2, 3)))
    c, h = out.next_state
    assert c.shape == h.shape == (2, 4)
    np.testing.assert_array_equal(out.output, h)
    assert not np.allclose(c, h)
    reset = lstm.reset_state(out.next_state)
    np.testing.assert_array_equal(reset[0], 0.0)
    np.testing.assert_array_equal(reset[1], 0.0)


def test_a_step_follows_the_lstm_equations():
    plain = LSTM(2, 3, nnx.Rngs(0), use_optimized=False)
    x = jnp.array([[0.5, -1.0]])
    state = (jnp.full((1, 3), 0.1), jnp.full((1, 3), -0.2))
    c, h = state
    cell = plain.cell
    names = {"i": ("ii", "hi"), "f": ("if_", "hf"), "g": ("ig", "hg"), "o": ("io", "ho")}
    gate = {g: getattr(cell, a)(x) + getattr(cell, b)(h) for g, (a, b) in names.items()}
    # c' = f * c + i * g, h' = o * tanh(c') with sigmoid gates and a tanh candidate.
    new_c = jax.nn.sigmoid(gate["f"]) * c + jax.nn.sigmoid(gate["i"]) * jnp.tanh(gate["g"])
    new_h = jax.nn.sigmoid(gate["o"]) * jnp.tanh(new_c)
    out = plain(state, x)
    np.testing.assert_allclose(out.next_state[0], new_c, rtol=1e-5)
    np.testing.assert_allclose(out.output, new_h, rtol=1e-5)


def test_trainable_initial_state_is_where_episodes_start_and_gets_gradients():
    lstm = LSTM(2, 3, nnx.Rngs(0), trainable_initial_state=True)
    assert lstm.initial_state is not None
    lstm.initial_state[...] = jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    c, h = lstm.reset_state(lstm.initialize_state(2))
    np.testing.assert_array_equal(c, [[1.0, 2.0, 3.0]] * 2)
    np.testing.assert_array_equal(h, [[4.0, 5.0, 6.0]] * 2)

    def loss(model: LSTM) -> jax.Array:
        return jnp.sum(model(model.initialize_state(1), jnp.zeros((1, 2))).output)

    grads = nnx.grad(loss)(lstm)
    assert float(jnp.abs(grads.initial_state[...]).sum()) > 0.0
