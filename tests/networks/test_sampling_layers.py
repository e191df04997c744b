"""NormalTanhSampler: re-scoring a stored raw action, deterministic eval, entropy bonus."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo.networks.sampling_layers import NormalTanhSampler

PARAMS = jnp.array([[0.3, 0.0]])  # A = 1: mean 0.3, raw std 0


def test_replay_rescores_the_stored_raw_action():
    sampler = NormalTanhSampler(nnx.Rngs(0), entropy_weight=0.0)
    out = sampler((), PARAMS, jnp.array([[0.5]]))
    # scale = softplus(0) + 0.001 = ln 2 + 0.001 = 0.694147; z = (0.5 - 0.3) / scale = 0.288123
    # log N = -z^2 / 2 - log(scale) - log(2 pi) / 2 = -0.595375
    # log |d tanh / du| at 0.5 = log(1 - tanh(0.5)^2) = -0.240229
    # log-likelihood = -0.595375 - (-0.240229) = -0.355146
    np.testing.assert_allclose(out.output["log_likelihood"], [-0.355146], atol=1e-5)
    np.testing.assert_allclose(out.output["action"], [[np.tanh(0.5)]], rtol=1e-6)
    np.testing.assert_array_equal(out.rollout_extras, [[0.5]])


def test_sampling_records_its_raw_action_and_replays_to_the_same_score():
    sampler = NormalTanhSampler(nnx.Rngs(1), entropy_weight=0.0)
    first = sampler((), jnp.zeros((4, 6)))
    second = sampler((), jnp.zeros((4, 6)))
    assert not np.allclose(first.output["action"], second.output["action"])  # new noise
    replay = sampler((), jnp.zeros((4, 6)), first.rollout_extras)
    np.testing.assert_allclose(
        replay.output["log_likelihood"], first.output["log_likelihood"], rtol=1e-6
    )
    np.testing.assert_array_equal(replay.output["action"], first.output["action"])


def test_eval_mode_is_deterministic_tanh_of_the_mean():
    sampler = NormalTanhSampler(nnx.Rngs(0), entropy_weight=0.0)
    sampler.eval()
    a = sampler((), PARAMS).output["action"]
    b = sampler((), PARAMS).output["action"]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a, [[np.tanh(0.3)]], rtol=1e-6)


def test_std_scale_and_min_std_shape_the_scale():
    sampler = NormalTanhSampler(nnx.Rngs(0), entropy_weight=0.0, min_std=0.1, std_scale=2.0)
    scale = sampler((), PARAMS).output["scale"]
    np.testing.assert_allclose(scale, [[2.0 * np.log(2.0) + 0.1]], rtol=1e-6)


def test_entropy_bonus_is_the_regularization_loss():
    sampler = NormalTanhSampler(nnx.Rngs(0), entropy_weight=0.5)
    out = sampler((), jnp.zeros((3, 4)))
    np.testing.assert_allclose(
        out.regularization_loss, -0.5 * jnp.mean(out.metrics["entropy"]), rtol=1e-6
    )
    with pytest.raises(ValueError, match="entropy_weight must be >= 0"):
        NormalTanhSampler(nnx.Rngs(0), entropy_weight=-1.0)
