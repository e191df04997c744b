"""Containers: carries threaded as lists/dicts, losses added, inputs routed, statistics
forwarded."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.networks.containers import Concat, Parallel, Sequential, Splitter
from nnx_ppo.networks.normalizer import Normalizer
from nnx_ppo.networks.recurrent import LSTM
from nnx_ppo.networks.types import StatefulModuleOutput
from nnx_ppo.networks.utils import Scale


class Counter(StatefulModule):
    """Carry: steps taken ``[B]``; output ``x + steps``; regularization ``weight``."""

    def __init__(self, weight: float = 1.0):
        self.weight = weight

    def initialize_state(self, batch_size: int) -> Any:
        return jnp.zeros((batch_size,), jnp.float32)

    def __call__(self, state: Any, x: Any, rollout_extras: Any = None) -> StatefulModuleOutput:
        out = x + state[:, None]
        return StatefulModuleOutput(
            state + 1.0, out, jnp.float32(self.weight), {"count": state}, state
        )


def test_sequential_threads_a_list_of_carries_and_adds_losses():
    net = Sequential([Counter(1.0), Scale(2.0), Counter(0.5)])
    state = net.initialize_state(2)
    assert isinstance(state, list) and len(state) == 3
    x = jnp.ones((2, 1))
    outputs = []
    for _ in range(3):
        out = net(state, x)
        state = out.next_state
        outputs.append(float(out.output[0, 0]))
    # step t: (1 + t) * 2 + t = 2 + 3t -> 2, 5, 8; both counters at 3 now.
    assert outputs == [2.0, 5.0, 8.0]
    assert float(out.regularization_loss) == 1.5
    np.testing.assert_array_equal(state[0], [3.0, 3.0])
    assert out.rollout_extras[1] is None  # Scale records nothing
    reset = net.reset_state(state)
    np.testing.assert_array_equal(reset[0], [0.0, 0.0])
    np.testing.assert_array_equal(reset[2], [0.0, 0.0])


def test_sequential_rejects_a_bare_module():
    with pytest.raises(ValueError, match=r"Sequential\(\[a, b\]\)"):
        Sequential(Scale(1.0))  # type: ignore[arg-type]


def test_parallel_dict_and_keyword_forms_give_the_same_dict():
    x = jnp.array([[1.0, 2.0]])
    a = Parallel({"double": Scale(2.0), "neg": Scale(-1.0)})
    b = Parallel(double=Scale(2.0), neg=Scale(-1.0))
    for net in (a, b):
        out = net(net.initialize_state(1), x)
        np.testing.assert_array_equal(out.output["double"], [[2.0, 4.0]])
        np.testing.assert_array_equal(out.output["neg"], [[-1.0, -2.0]])


def test_parallel_carries_are_a_dict_and_reset_per_child():
    net = Parallel(c=Counter(), s=Scale(1.0))
    state = net.initialize_state(1)
    state = net(state, jnp.zeros((1, 1))).next_state
    assert set(state) == {"c", "s"}
    assert float(state["c"][0]) == 1.0
    assert float(net.reset_state(state)["c"][0]) == 0.0


def test_parallel_needs_modules():
    with pytest.raises(ValueError, match="child 'a' must be a StatefulModule"):
        Parallel(a=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not both"):
        Parallel({"a": Scale(1.0)}, b=Scale(1.0))


def test_concat_routes_keys_and_concatenates_in_child_order():
    net = Concat(b=Scale(10.0), a=Scale(1.0))
    out = net(net.initialize_state(1), {"a": jnp.array([[1.0]]), "b": jnp.array([[2.0, 3.0]])})
    np.testing.assert_array_equal(out.output, [[20.0, 30.0, 1.0]])  # b's part first
    with pytest.raises(ValueError, match=r"child 'b' reads input key 'b'; input keys: \['a'\]"):
        net(net.initialize_state(1), {"a": jnp.array([[1.0]])})


def test_splitter_slices_in_order():
    out = Splitter(mean=2, log_std=1)((), jnp.array([[1.0, 2.0, 3.0]])).output
    assert list(out) == ["mean", "log_std"]
    np.testing.assert_array_equal(out["mean"], [[1.0, 2.0]])
    np.testing.assert_array_equal(out["log_std"], [[3.0]])
    with pytest.raises(ValueError, match="add up to 3, but the input's last axis is 4"):
        Splitter(mean=2, log_std=1)((), jnp.zeros((1, 4)))
    with pytest.raises(ValueError, match="size 'a' must be a positive int"):
        Splitter(a=0)


def test_statistics_reach_a_normalizer_after_stateless_layers():
    net = Sequential([Scale(2.0), Normalizer(2)])
    obs = jnp.arange(12.0).reshape(3, 2, 2)  # [T, B, 2]
    net.update_statistics(obs)
    norm = net.layers[1]
    # The normalizer sees 2 * obs: mean over the 6 rows of [0, 2, ..., 22] by column.
    np.testing.assert_allclose(norm.mean[...], [10.0, 12.0])
    assert float(norm.count[...]) == 6.0


def test_statistics_after_a_recurrent_layer_are_refused_by_name():
    net = Sequential([LSTM(2, 2, nnx.Rngs(0)), Normalizer(2)])
    with pytest.raises(ValueError, match=r"Sequential layer 0 \(LSTM\) keeps a carry"):
        net.update_statistics(jnp.zeros((3, 2, 2)))


def test_statistics_reach_parallel_and_concat_children():
    par = Parallel(n=Normalizer(1), s=Scale(1.0))
    par.update_statistics(jnp.full((2, 2, 1), 4.0))
    np.testing.assert_allclose(par.children["n"].mean[...], [4.0])
    cat = Concat(a=Normalizer(1))
    cat.update_statistics({"a": jnp.full((2, 2, 1), -3.0), "b": jnp.zeros((2, 2, 5))})
    np.testing.assert_allclose(cat.children["a"].mean[...], [-3.0])
