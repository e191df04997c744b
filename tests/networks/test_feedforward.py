"""Toolkit Dense: affine map, optional activation by name or callable, no carry."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo.networks.feedforward import Dense


def test_dense_applies_its_activation_after_the_affine_map():
    ones = nnx.initializers.ones_init()
    layer = Dense(2, 1, nnx.Rngs(0), activation="relu", kernel_init=ones)
    x = jnp.array([[1.0, 2.0], [-3.0, -1.0]])
    out = layer(layer.initialize_state(2), x)
    # kernel of ones, zero bias: sums 3 and -4; relu -> 3 and 0.
    np.testing.assert_array_equal(out.output, [[3.0], [0.0]])
    assert out.next_state == ()
    affine = Dense(2, 1, nnx.Rngs(0), kernel_init=ones)
    np.testing.assert_array_equal(affine((), x).output, [[3.0], [-4.0]])
    square = Dense(2, 1, nnx.Rngs(0), activation=jnp.square, kernel_init=ones)
    np.testing.assert_array_equal(square((), x).output, [[9.0], [16.0]])


def test_dense_checks_its_sizes_and_activation_name():
    with pytest.raises(ValueError, match="out_features must be a positive int"):
        Dense(2, 0, nnx.Rngs(0))
    with pytest.raises(ValueError, match="activation must be one of"):
        Dense(2, 1, nnx.Rngs(0), activation="sigmoidish")
