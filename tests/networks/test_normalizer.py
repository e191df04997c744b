"""Observation normalizer: running statistics, clipping, and its separation from parameters."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from nnx_ppo.networks.factories import make_mlp_actor_critic
from nnx_ppo.networks.normalizer import Normalizer, NormalizerStatistics

N_FEATURES = 3


def chunks(seed: int = 0) -> list[np.ndarray]:
    """Three ``[T, B, F]`` batches of different sizes, means and scales."""
    rng = np.random.default_rng(seed)
    shapes = [(4, 5), (2, 3), (7, 1)]
    locs = [np.array([1.0, -2.0, 10.0]), np.array([3.0, 0.0, 9.0]), np.array([0.0, 5.0, 11.0])]
    scales = [np.array([1.0, 0.5, 2.0]), np.array([2.0, 1.0, 0.1]), np.array([0.3, 3.0, 1.0])]
    return [
        (loc + scale * rng.standard_normal((*shape, N_FEATURES))).astype(np.float32)
        for shape, loc, scale in zip(shapes, locs, scales, strict=True)
    ]


def statistics(norm: Normalizer) -> tuple[np.ndarray, np.ndarray, float]:
    """(mean, population variance, count) as the normalizer holds them."""
    count = float(norm.count[...])
    return np.asarray(norm.mean[...]), np.asarray(norm.m2[...]) / count, count


def test_merged_chunks_match_numpy_over_all_data():
    norm = Normalizer(N_FEATURES)
    data = chunks()
    for batch in data:
        norm.update_statistics(jnp.asarray(batch))
    flat = np.concatenate([b.reshape(-1, N_FEATURES) for b in data]).astype(np.float64)
    mean, var, count = statistics(norm)
    assert count == 4 * 5 + 2 * 3 + 7 * 1  # 33 observations in all
    np.testing.assert_allclose(mean, flat.mean(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(var, flat.var(axis=0), rtol=1e-4)


def test_masked_entries_are_ignored():
    norm = Normalizer(N_FEATURES)
    data = chunks(seed=1)
    rng = np.random.default_rng(2)
    masks = [rng.random(b.shape[:2]) < 0.6 for b in data]
    masks[0][0, 0] = True  # at least one kept entry
    for batch, mask in zip(data, masks, strict=True):
        # Masked-out entries get huge values: any leak into the statistics would show.
        poisoned = np.where(mask[..., None], batch, 1e6).astype(np.float32)
        norm.update_statistics(jnp.asarray(poisoned), jnp.asarray(mask))
    kept = np.concatenate([b[m] for b, m in zip(data, masks, strict=True)]).astype(np.float64)
    mean, var, count = statistics(norm)
    assert count == sum(int(m.sum()) for m in masks)
    np.testing.assert_allclose(mean, kept.mean(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(var, kept.var(axis=0), rtol=1e-4)


def test_all_masked_batch_changes_nothing():
    norm = Normalizer(N_FEATURES)
    first = chunks()[0]
    norm.update_statistics(jnp.asarray(first))
    before = statistics(norm)
    norm.update_statistics(jnp.full((2, 2, N_FEATURES), 50.0), jnp.zeros((2, 2), bool))
    after = statistics(norm)
    for b, a in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)


def test_dict_observations_are_flattened_in_sorted_key_order():
    # {"b": [2], "a": [2, 2]} flattens to a's 4 features, then b's 2.
    norm = Normalizer({"b": (2,), "a": (2, 2)})
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 4, 2, 2)).astype(np.float32) + 3.0
    b = rng.standard_normal((6, 4, 2)).astype(np.float32) - 1.0
    norm.update_statistics({"a": jnp.asarray(a), "b": jnp.asarray(b)})
    flat = np.concatenate([a.reshape(24, 4), b.reshape(24, 2)], axis=1).astype(np.float64)
    mean, var, count = statistics(norm)
    assert count == 24
    np.testing.assert_allclose(mean, flat.mean(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(var, flat.var(axis=0), rtol=1e-4)


def test_normalize_standardizes_with_the_running_statistics():
    norm = Normalizer(N_FEATURES)
    data = chunks()
    for batch in data:
        norm.update_statistics(jnp.asarray(batch))
    flat = np.concatenate([b.reshape(-1, N_FEATURES) for b in data]).astype(np.float64)
    x = flat[:5]
    expected = (x - flat.mean(axis=0)) / flat.std(axis=0)  # every std here is well above 1e-2
    np.testing.assert_allclose(norm.normalize(jnp.asarray(x, jnp.float32)), expected, atol=1e-4)


def test_zero_variance_is_floored_and_output_clipped():
    norm = Normalizer(2, std_min=1e-2, clip=10.0)
    norm.update_statistics(jnp.full((3, 4, 2), 5.0))  # every observation the same
    mean, var, _ = statistics(norm)
    np.testing.assert_allclose(mean, [5.0, 5.0])
    np.testing.assert_array_equal(var, [0.0, 0.0])
    # std floored to 1e-2: (5.001 - 5) / 1e-2 = 0.1; (5 + 1) / 1e-2 = 100 -> clipped to 10;
    # (5 - 1) / 1e-2 = -100 -> clipped to -10.
    out = np.asarray(norm.normalize(jnp.array([[5.001, 6.0], [4.0, 5.0]])))
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, [[0.1, 10.0], [-10.0, 0.0]], atol=2e-3)


def test_fresh_normalizer_is_finite_and_clipped():
    # No statistics yet: mean 0, variance 0 (count floored to 1), std floored to 0.5.
    norm = Normalizer(2, std_min=0.5, clip=3.0)
    out = np.asarray(norm.normalize(jnp.array([[1.0, -100.0]])))
    np.testing.assert_allclose(out, [[2.0, -3.0]])  # 1 / 0.5 = 2; -100 / 0.5 = -200 -> -3


def small_network():
    return make_mlp_actor_critic(
        4, 2, rngs=nnx.Rngs(0), actor_hidden_sizes=(8,), critic_hidden_sizes=(8,)
    )


def test_statistics_are_not_parameters():
    net = small_network()
    stats = nnx.state(net, NormalizerStatistics)
    params = nnx.state(net, nnx.Param)
    assert len(jax.tree.leaves(stats)) == 3  # mean, m2, count
    assert not any(isinstance(v, nnx.Param) for v in jax.tree.leaves(stats, is_leaf=_is_var))
    param_paths = {path for path, _ in nnx.to_flat_state(params)}
    assert not any("normalizer" in path for path in param_paths)
    assert param_paths  # the network does have parameters


def _is_var(x) -> bool:
    return isinstance(x, nnx.Variable)


def test_optimizer_step_leaves_statistics_alone():
    net = small_network()
    obs = jnp.asarray(np.random.default_rng(0).standard_normal((16, 4)) * 3 + 1, jnp.float32)
    net.update_statistics(obs)
    stats_before = jax.tree.map(np.asarray, nnx.state(net, NormalizerStatistics))
    params_before = jax.tree.map(np.asarray, nnx.state(net, nnx.Param))
    # Weight decay would shrink the statistics too if the optimizer covered them.
    optimizer = nnx.Optimizer(net, optax.adamw(0.1, weight_decay=0.5), wrt=nnx.Param)

    def loss(model):
        # Depends on the normalizer's statistics, so a gradient through them would exist.
        out = model(model.initialize_state(16), obs, None).output
        return jnp.sum(out.value_estimates**2) + jnp.sum(out.distribution_params["loc"] ** 2)

    @nnx.jit  # one compilation instead of many eager ops
    def sgd_step(model, opt):
        grads = nnx.grad(loss)(model)
        opt.update(model, grads)
        return grads

    grads = sgd_step(net, optimizer)
    grad_paths = {path for path, _ in nnx.to_flat_state(grads)}
    assert grad_paths and not any("normalizer" in path for path in grad_paths)

    stats_after = jax.tree.map(np.asarray, nnx.state(net, NormalizerStatistics))
    jax.tree.map(np.testing.assert_array_equal, stats_after, stats_before)
    assert float(stats_after["layers"][0]["count"][...]) == 16  # still the one update
    params_after = jax.tree.map(np.asarray, nnx.state(net, nnx.Param))
    changed = jax.tree.leaves(
        jax.tree.map(lambda a, b: not np.array_equal(a, b), params_after, params_before)
    )
    assert any(changed), "the optimizer step should have moved the parameters"


def test_as_a_layer_the_output_keeps_the_observation_structure():
    # networks-api.md's Normalizer(shape): a dict stays a dict, each leaf in its shape.
    norm = Normalizer(shape={"state": (2, 2), "target": (1,)})
    obs = {"state": jnp.full((3, 2, 2), 5.0), "target": jnp.full((3, 1), -2.0)}
    norm.update_statistics(jax.tree.map(lambda x: x[None], obs))  # one [T=1, B=3] batch
    out = norm((), {"state": jnp.full((1, 2, 2), 5.5), "target": jnp.full((1, 1), -2.0)}).output
    assert out["state"].shape == (1, 2, 2) and out["target"].shape == (1, 1)
    # zero variance: std floored to 1e-2, so (5.5 - 5) / 1e-2 = 50 is clipped to 10.
    np.testing.assert_allclose(out["state"], 10.0)
    np.testing.assert_allclose(out["target"], 0.0)
    np.testing.assert_allclose(norm.normalize(obs)[0], jnp.zeros(5))  # still flattened there


def test_obs_size_and_shape_are_one_or_the_other():
    with pytest.raises(ValueError, match="one of obs_size and shape"):
        Normalizer(3, shape=3)
    with pytest.raises(ValueError, match="one of obs_size and shape"):
        Normalizer()
