"""Tanh-normal action sampler: bounds, density, eval-mode determinism and exact replay."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
from flax import nnx

from nnx_ppo.networks.samplers import TanhNormalSampler

ACTION_SIZE = 3
BATCH = 16  # one batch size everywhere: each new shape costs op compilations
MIN_STD = 1e-3


def make_sampler(seed: int = 0) -> TanhNormalSampler:
    return TanhNormalSampler(ACTION_SIZE, rngs=nnx.Rngs(seed), min_std=MIN_STD)


def make_params(batch: int = BATCH, seed: int = 0, loc_scale: float = 1.0) -> np.ndarray:
    """``[B, 2A]`` distribution parameters: means first, pre-softplus scales second."""
    rng = np.random.default_rng(seed)
    loc = loc_scale * rng.standard_normal((batch, ACTION_SIZE))
    pre_scale = rng.uniform(-1.5, 0.5, (batch, ACTION_SIZE))
    return np.concatenate([loc, pre_scale], axis=1).astype(np.float32)


def numpy_loglik(raw: np.ndarray, params: np.ndarray) -> np.ndarray:
    """Tanh-normal log-density of ``tanh(raw)``, in float64: the normal log-density of
    ``raw`` minus ``sum log(1 - tanh(raw)^2)`` (the change of variables)."""
    raw, params = raw.astype(np.float64), params.astype(np.float64)
    loc, pre = params[:, :ACTION_SIZE], params[:, ACTION_SIZE:]
    scale = np.log1p(np.exp(pre)) + MIN_STD
    normal = -0.5 * ((raw - loc) / scale) ** 2 - np.log(scale) - 0.5 * math.log(2 * math.pi)
    return normal.sum(axis=-1) - np.log(1.0 - np.tanh(raw) ** 2).sum(axis=-1)


def call(sampler, params, extras=None):
    return sampler((), jnp.asarray(params), extras)


def test_actions_lie_in_unit_box_even_for_extreme_means():
    sampler = make_sampler()
    params = make_params(loc_scale=30.0)  # many means deep in tanh's flat tails
    out = call(sampler, params).output
    actions = np.asarray(out["actions"])
    assert actions.shape == (BATCH, ACTION_SIZE)
    assert np.all(np.abs(actions) <= 1.0)
    np.testing.assert_allclose(actions, np.tanh(np.asarray(out["raw_actions"])), atol=1e-6)


def test_loglikelihood_matches_numpy_tanh_normal_density():
    sampler = make_sampler()
    params = make_params()
    out = call(sampler, params).output
    raw = np.asarray(out["raw_actions"])
    assert np.max(np.abs(raw)) < 4.0  # keeps 1 - tanh^2 well away from float underflow
    np.testing.assert_allclose(out["loglikelihoods"], numpy_loglik(raw, params), rtol=1e-4)
    # The scale is softplus(pre) + min_std.
    expected_scale = np.log1p(np.exp(params[:, ACTION_SIZE:].astype(np.float64))) + MIN_STD
    np.testing.assert_allclose(out["scale"], expected_scale, rtol=1e-5)
    np.testing.assert_allclose(out["loc"], params[:, :ACTION_SIZE])


def test_scale_never_drops_below_min_std():
    params = make_params()
    params[:, ACTION_SIZE:] = -200.0  # softplus(-200) underflows to 0
    out = call(make_sampler(), params).output
    np.testing.assert_allclose(out["scale"], MIN_STD)
    assert np.all(np.isfinite(np.asarray(out["loglikelihoods"])))


def test_train_mode_samples_differ_between_calls():
    sampler = make_sampler()
    params = make_params()
    first = np.asarray(call(sampler, params).output["actions"])
    second = np.asarray(call(sampler, params).output["actions"])
    assert not np.allclose(first, second)
    loc = params[:, :ACTION_SIZE]
    assert not np.allclose(first, np.tanh(loc))


def test_eval_mode_is_deterministic_mean_action():
    sampler = make_sampler()
    params = make_params()
    sampler.eval()
    first = call(sampler, params).output
    second = call(sampler, params).output
    expected = np.tanh(params[:, :ACTION_SIZE])
    np.testing.assert_allclose(first["actions"], expected, rtol=1e-6)
    np.testing.assert_array_equal(first["actions"], second["actions"])
    # The density is still that of the tanh-normal, evaluated at the mean.
    np.testing.assert_allclose(
        first["loglikelihoods"], numpy_loglik(params[:, :ACTION_SIZE], params), rtol=1e-4
    )
    sampler.train()
    third = np.asarray(call(sampler, params).output["actions"])
    assert not np.allclose(third, expected)


def test_replay_reproduces_loglikelihood_and_action():
    sampler = make_sampler()
    params = make_params()
    acting = call(sampler, params)
    replay = call(sampler, params, acting.rollout_extras)
    np.testing.assert_array_equal(replay.output["raw_actions"], acting.output["raw_actions"])
    np.testing.assert_array_equal(replay.output["actions"], acting.output["actions"])
    np.testing.assert_allclose(
        replay.output["loglikelihoods"], acting.output["loglikelihoods"], rtol=1e-6
    )


def test_replay_scores_the_recorded_action_under_new_parameters():
    sampler = make_sampler()
    old, new = make_params(seed=0), make_params(seed=1)
    acting = call(sampler, old)
    replay = call(sampler, new, acting.rollout_extras)
    raw = np.asarray(acting.rollout_extras)
    np.testing.assert_allclose(replay.output["loglikelihoods"], numpy_loglik(raw, new), rtol=1e-4)
    assert not np.allclose(replay.output["loglikelihoods"], acting.output["loglikelihoods"])


def test_sampling_follows_the_rng_seed():
    params = make_params()
    a = call(make_sampler(seed=3), params).output["actions"]
    b = call(make_sampler(seed=3), params).output["actions"]
    c = call(make_sampler(seed=4), params).output["actions"]
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
