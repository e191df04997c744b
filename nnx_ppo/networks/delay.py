"""``Delay``: the input from ``k`` steps ago, from a per-env circular buffer."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from nnx_ppo.networks.base import StatefulModule, zero_loss
from nnx_ppo.networks.types import StatefulOutput


def read_slot(buffer: jax.Array, slot: jax.Array) -> jax.Array:
    """``buffer[b, slot[b]]`` for each env ``b``; ``buffer`` is ``[B, K, ...]``."""
    return jax.vmap(lambda buf, i: buf[i])(buffer, slot)


def write_slot(buffer: jax.Array, slot: jax.Array, value: jax.Array) -> jax.Array:
    """``buffer`` with ``buffer[b, slot[b]] = value[b]`` for each env ``b``."""
    return jax.vmap(lambda buf, i, v: buf.at[i].set(v))(buffer, slot, value)


class Delay(StatefulModule):
    """Outputs the input of ``k_steps`` steps ago (any pytree); ``initial_value`` until then.

    The carry is ``(buffers, index)``: per leaf a ``[B, k_steps, ...]`` circular buffer and a
    ``[B]`` write index. At each step the slot at the index (written ``k_steps`` steps ago)
    is read, then the input written there. ``reset_state`` fills the buffers with
    ``initial_value`` again. With ``k_steps=0`` the input passes through and there is no carry.

    Args:
        sample_input: One env's input (no batch axis): a pytree of arrays or shapes'
            examples, giving each leaf's shape and dtype.
        k_steps: The delay, ``>= 0``.
        initial_value: What is output before the buffer has filled.
    """

    def __init__(self, sample_input: Any, k_steps: int, initial_value: float = 0.0):
        if isinstance(k_steps, bool) or not isinstance(k_steps, int) or k_steps < 0:
            raise ValueError(f"Delay k_steps must be an int >= 0, got {k_steps!r}")
        self.k_steps = k_steps
        self.initial_value = float(initial_value)
        self.leaf_specs = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)), sample_input
        )

    def initialize_state(self, batch_size: int) -> Any:
        if self.k_steps == 0:
            return ()

        def fill(spec: jax.ShapeDtypeStruct) -> jax.Array:
            shape = (batch_size, self.k_steps, *spec.shape)
            return jnp.full(shape, self.initial_value, spec.dtype)

        buffers = jax.tree.map(fill, self.leaf_specs)
        return (buffers, jnp.zeros((batch_size,), jnp.int32))

    def __call__(self, state: Any, x: Any, rollout_extras: Any = None) -> StatefulOutput:
        if self.k_steps == 0:
            return StatefulOutput(state, x, zero_loss(), {}, None)
        buffers, index = state
        out = jax.tree.map(lambda buf: read_slot(buf, index), buffers)
        buffers = jax.tree.map(lambda buf, v: write_slot(buf, index, v), buffers, x)
        next_state = (buffers, (index + 1) % self.k_steps)
        return StatefulOutput(next_state, out, zero_loss(), {}, None)
