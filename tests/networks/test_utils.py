"""Flattener, Filter, Scale, Merge and Map on nested inputs."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from nnx_ppo.networks.utils import Filter, Flattener, Map, Merge, Scale


def nested():
    """``{"a": {"x": [B, 2, 2], "y": [B, 1]}, "b": [B, 3]}`` with B = 2, values 0..15."""
    x = jnp.arange(8.0).reshape(2, 2, 2)
    y = jnp.array([[100.0], [101.0]])
    b = jnp.arange(6.0).reshape(2, 3) + 10.0
    return {"b": b, "a": {"y": y, "x": x}}


def test_flattener_flattens_everything_in_sorted_key_order():
    out = Flattener()((), nested()).output
    # a/x (4), a/y (1), then b (3): row 0 = [0 1 2 3 | 100 | 10 11 12].
    np.testing.assert_array_equal(out[0], [0, 1, 2, 3, 100, 10, 11, 12])
    assert out.shape == (2, 8)


def test_flattener_preserves_the_top_levels():
    one = Flattener(preserve_levels=1)((), nested()).output
    assert set(one) == {"a", "b"}
    np.testing.assert_array_equal(one["a"][1], [4, 5, 6, 7, 101])
    np.testing.assert_array_equal(one["b"][1], [13, 14, 15])
    two = Flattener(preserve_levels=2)((), nested()).output
    np.testing.assert_array_equal(two["a"]["x"][0], [0, 1, 2, 3])
    assert two["a"]["y"].shape == (2, 1)
    pair = Flattener(preserve_levels=1)((), (jnp.zeros((2, 2, 3)), jnp.zeros((2, 1))))
    assert isinstance(pair.output, tuple)
    assert [p.shape for p in pair.output] == [(2, 6), (2, 1)]
    with pytest.raises(ValueError, match="preserve_levels must be an int >= 0"):
        Flattener(-1)


def test_filter_keys_paths_and_callables():
    x = {"s": {"pos": jnp.array([[1.0, 2.0]]), "parts": [jnp.array([[3.0]]), jnp.array([[4.0]])]}}
    f = Filter(
        {
            "state": "s",
            "pos": ("s", "pos"),
            "second": ("s", "parts", 1),
            "norm": lambda v: v["s"]["pos"] * 2.0,
        }
    )
    out = f((), x).output
    assert list(out) == ["state", "pos", "second", "norm"]
    assert out["state"] is x["s"]
    np.testing.assert_array_equal(out["second"], [[4.0]])
    np.testing.assert_array_equal(out["norm"], [[2.0, 4.0]])


def test_filter_names_a_missing_path():
    f = Filter({"v": ("s", "vel")})
    with pytest.raises(ValueError, match=r"'v': path \('s', 'vel'\) has no 'vel' at depth 1"):
        f((), {"s": {"pos": jnp.zeros((1, 2))}})


def test_scale_multiplies_every_leaf():
    out = Scale(-0.5)((), {"a": jnp.array([2.0]), "b": jnp.array([4.0])}).output
    np.testing.assert_array_equal(out["a"], [-1.0])
    np.testing.assert_array_equal(out["b"], [-2.0])


def test_merge_unions_the_children_dicts():
    net = Merge(f=Filter({"p": "a"}), g=Filter({"q": "b"}))
    out = net(net.initialize_state(1), {"a": jnp.ones((1, 1)), "b": jnp.zeros((1, 1))}).output
    assert set(out) == {"p", "q"}


def test_merge_refuses_a_key_produced_twice():
    net = Merge({"f": Filter({"p": "a"}), "g": Filter({"p": "b"})})
    with pytest.raises(ValueError, match="key 'p' is produced by both 'f' and 'g'"):
        net(net.initialize_state(1), {"a": jnp.ones((1, 1)), "b": jnp.zeros((1, 1))})


def test_map_applies_children_by_key_and_drops_the_rest():
    net = Map(a=Scale(2.0), b=Scale(3.0))
    x = {"a": jnp.array([[1.0]]), "b": jnp.array([[1.0]]), "c": jnp.array([[9.0]])}
    out = net(net.initialize_state(1), x).output
    assert set(out) == {"a", "b"}
    np.testing.assert_array_equal(out["b"], [[3.0]])
    with pytest.raises(ValueError, match=r"Map child 'b' reads input key 'b'"):
        net(net.initialize_state(1), {"a": jnp.ones((1, 1))})
