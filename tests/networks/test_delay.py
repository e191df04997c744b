"""Delay: the input from k steps ago, initial_value before, per-env reset."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from nnx_ppo.algorithms.rollout import tree_where
from nnx_ppo.networks.delay import Delay


def run(delay, state, inputs):
    outputs = []
    for x in inputs:
        out = delay(state, x)
        state = out.next_state
        outputs.append(out.output)
    return outputs, state


def test_delay_two_outputs_the_input_from_two_steps_ago():
    d = Delay(jnp.zeros(()), 2, initial_value=-1.0)
    xs = [jnp.array([t, 10.0 * t]) for t in (1.0, 2.0, 3.0, 4.0, 5.0)]  # B = 2 envs
    outputs, _ = run(d, d.initialize_state(2), xs)
    # t = 0, 1: buffer not yet filled -> -1; then the inputs of t - 2: 1, 2, 3.
    assert [float(o[0]) for o in outputs] == [-1.0, -1.0, 1.0, 2.0, 3.0]
    assert [float(o[1]) for o in outputs] == [-1.0, -1.0, 10.0, 20.0, 30.0]


def test_delay_of_a_pytree():
    d = Delay({"a": jnp.zeros((2,)), "b": jnp.zeros((), jnp.int32)}, 1)
    x = {"a": jnp.array([[1.0, 2.0]]), "b": jnp.array([7], jnp.int32)}
    (first, second), _ = run(d, d.initialize_state(1), [x, x])
    np.testing.assert_array_equal(first["a"], [[0.0, 0.0]])
    assert first["b"].dtype == jnp.int32
    np.testing.assert_array_equal(second["b"], [7])


def test_reset_clears_only_the_envs_whose_episode_ended():
    d = Delay(jnp.zeros(()), 1)
    _, state = run(d, d.initialize_state(2), [jnp.array([5.0, 6.0])])
    state = tree_where(jnp.array([True, False]), d.reset_state(state), state)
    out = d(state, jnp.array([0.0, 0.0])).output
    np.testing.assert_array_equal(out, [0.0, 6.0])  # env 0 starts over, env 1 remembers


def test_zero_delay_passes_through_without_carry():
    d = Delay(jnp.zeros((3,)), 0)
    assert d.initialize_state(4) == ()
    np.testing.assert_array_equal(d((), jnp.ones((4, 3))).output, jnp.ones((4, 3)))
    with pytest.raises(ValueError, match="k_steps must be an int >= 0"):
        Delay(jnp.zeros(()), -1)
