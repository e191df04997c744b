"""LSTM and Sequential: state carried between steps, reset to zeros, gate arithmetic."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from nnx_ppo.networks.layers import LSTM, MLP, Sequential

IN, HIDDEN, BATCH = 3, 4, 2


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def numpy_lstm_step(lstm: LSTM, h, c, x):
    """One LSTM step, written out: gates from ``[x, h] @ W + b`` split as (i, f, g, o)."""
    w = np.asarray(lstm.gates.kernel[...], np.float64)
    b = np.asarray(lstm.gates.bias[...], np.float64)
    z = np.concatenate([x, h], axis=-1) @ w + b
    i, f, g, o = np.split(z, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    h = sigmoid(o) * np.tanh(c)
    return h, c


def run(module, inputs: np.ndarray, state=None):
    """Feeds ``[T, B, F]`` inputs one step at a time; returns outputs ``[T, B, H]`` and state."""
    state = module.initialize_state(inputs.shape[1]) if state is None else state
    outputs = []
    for x in inputs:
        out = module(state, jnp.asarray(x))
        state = out.next_state
        outputs.append(np.asarray(out.output))
    return np.stack(outputs), state


def test_lstm_matches_written_out_equations():
    lstm = LSTM(IN, HIDDEN, rngs=nnx.Rngs(0))
    inputs = np.random.default_rng(0).standard_normal((5, BATCH, IN))
    outputs, (h_end, c_end) = run(lstm, inputs)
    h = c = np.zeros((BATCH, HIDDEN))
    for t, x in enumerate(inputs):
        h, c = numpy_lstm_step(lstm, h, c, x)
        np.testing.assert_allclose(outputs[t], h, atol=1e-5)
    np.testing.assert_allclose(h_end, h, atol=1e-5)
    np.testing.assert_allclose(c_end, c, atol=1e-5)


def test_forget_gate_bias_starts_at_one():
    lstm = LSTM(IN, HIDDEN, rngs=nnx.Rngs(0))
    bias = np.asarray(lstm.gates.bias[...])
    np.testing.assert_array_equal(bias[HIDDEN : 2 * HIDDEN], 1.0)  # gate order (i, f, g, o)
    np.testing.assert_array_equal(np.delete(bias, np.s_[HIDDEN : 2 * HIDDEN]), 0.0)


def test_lstm_output_depends_on_earlier_inputs():
    lstm = LSTM(IN, HIDDEN, rngs=nnx.Rngs(0))
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, BATCH, IN))
    b = a.copy()
    b[0] += 2.0  # only the first input differs
    out_a, _ = run(lstm, a)
    out_b, _ = run(lstm, b)
    # The last step sees the same input in both runs but remembers different pasts.
    assert np.max(np.abs(out_a[-1] - out_b[-1])) > 1e-3


def test_lstm_state_shapes_and_reset_to_zeros():
    lstm = LSTM(IN, HIDDEN, rngs=nnx.Rngs(0))
    init = lstm.initialize_state(BATCH)
    assert [s.shape for s in init] == [(BATCH, HIDDEN)] * 2
    assert all(np.all(np.asarray(s) == 0) for s in init)
    _, state = run(lstm, np.ones((2, BATCH, IN)))
    assert all(np.any(np.asarray(s) != 0) for s in state)
    reset = lstm.reset_state(state)
    assert [s.shape for s in reset] == [(BATCH, HIDDEN)] * 2
    assert all(np.all(np.asarray(s) == 0) for s in reset)
    # After a reset the LSTM behaves exactly like a fresh one.
    inputs = np.random.default_rng(2).standard_normal((2, BATCH, IN))
    np.testing.assert_array_equal(run(lstm, inputs, reset)[0], run(lstm, inputs)[0])


def test_sequential_carries_and_resets_the_inner_lstm_state():
    rngs = nnx.Rngs(0)
    seq = Sequential(LSTM(IN, HIDDEN, rngs=rngs), MLP((HIDDEN, 5, 2), rngs=rngs))
    init = seq.initialize_state(BATCH)
    assert len(init) == 2 and init[1] == ()  # the MLP is stateless
    a = np.random.default_rng(3).standard_normal((3, BATCH, IN))
    b = a.copy()
    b[0] -= 1.5
    out_a, state = run(seq, a)
    out_b, _ = run(seq, b)
    assert out_a.shape == (3, BATCH, 2)
    assert np.max(np.abs(out_a[-1] - out_b[-1])) > 1e-4
    reset = seq.reset_state(state)
    assert all(np.all(np.asarray(x) == 0) for x in jax.tree.leaves(reset))
    assert jax.tree.structure(reset) == jax.tree.structure(init)
