"""``LSTM``: an LSTM cell as a ``StatefulModule`` whose carry is ``(c, h)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.networks.base import StatefulModule, zero_loss
from nnx_ppo.networks.precision import DEFAULT_PRECISION, check_precision, linear_kwargs
from nnx_ppo.networks.types import StatefulOutput

Initializer = Callable[..., jax.Array]

LECUN_NORMAL = nnx.initializers.lecun_normal()
ORTHOGONAL = nnx.initializers.orthogonal()
ZEROS = nnx.initializers.zeros_init()


def forget_bias_init(value: float = 1.0) -> Initializer:
    """A bias initializer for an LSTM's fused gates ``(i, f, g, o)``: zeros, except the
    forget gate's quarter, which starts at ``value`` (memory is kept early in training)."""

    def init(key: jax.Array, shape: Any, dtype: Any = jnp.float32) -> jax.Array:
        del key
        (n,) = shape
        hidden = n // 4
        return jnp.zeros(shape, dtype).at[hidden : 2 * hidden].set(value)

    return init


class ConcatLSTMCell(nnx.Module):
    """An LSTM cell whose four gates ``(i, f, g, o)`` come from one affine map of the
    concatenated ``[x, h]``: ``gates.kernel`` is ``[in + hidden, 4 * hidden]``, drawn whole by
    ``kernel_init``. Carry ``(c, h)``, arithmetic otherwise ``nnx.OptimizedLSTMCell``'s."""

    def __init__(
        self,
        in_features: int,
        hidden_features: int,
        *,
        gate_fn: Callable[[jax.Array], jax.Array],
        activation_fn: Callable[[jax.Array], jax.Array],
        kernel_init: Initializer,
        bias_init: Initializer,
        precision: str,
        rngs: nnx.Rngs,
    ):
        self.gate_fn = gate_fn
        self.activation_fn = activation_fn
        self.gates = nnx.Linear(
            in_features + hidden_features,
            4 * hidden_features,
            kernel_init=kernel_init,
            bias_init=bias_init,
            rngs=rngs,
            **linear_kwargs(precision),
        )

    def __call__(
        self, carry: tuple[jax.Array, jax.Array], x: jax.Array
    ) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
        c, h = carry
        z = self.gates(jnp.concatenate([x, h], axis=-1))
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c = self.gate_fn(f) * c + self.gate_fn(i) * self.activation_fn(g)
        h = self.gate_fn(o) * self.activation_fn(c)
        return (c, h), h


class LSTM(StatefulModule):
    """One LSTM cell (``nnx.OptimizedLSTMCell``, ``nnx.LSTMCell`` or ``ConcatLSTMCell``);
    output ``h``.

    The carry is ``(c, h)``, each ``[B, hidden_features]``; where an episode ends it goes
    back to zeros, or to the trained initial state with ``trainable_initial_state``.

    Args:
        in_features: Input features.
        hidden_features: Units.
        rngs: Streams for initialization.
        gate_fn, activation_fn, kernel_init, recurrent_kernel_init, bias_init: As for
            ``nnx.LSTMCell`` (sigmoid, tanh, Lecun-normal, orthogonal, zeros).
        use_optimized: The fused-gates cell (``OptimizedLSTMCell``), same arithmetic.
        trainable_initial_state: Learn the ``(c, h)`` an episode starts from.
        concat_inputs: One affine map of ``[x, h]`` (``ConcatLSTMCell``: ``kernel_init``
            draws its whole ``[in + hidden, 4 * hidden]`` kernel, so ``recurrent_kernel_init``
            must stay the default and ``use_optimized`` does not apply): the layout and the
            arithmetic of this project's LSTM before the toolkit, which
            ``make_lstm_actor_critic`` keeps (an addition to the interface).
        precision: ``"float32"`` or ``"bfloat16"``: the arithmetic of the gates' product
            with ``concat_inputs`` (``nnx_ppo.networks.precision``); flax's cells are float32
            (an addition to the interface).

    Raises:
        ValueError: For a ``hidden_features`` that is not a positive int, a
            ``recurrent_kernel_init`` with ``concat_inputs``, or a ``precision`` other than
            float32 without it.
    """

    def __init__(
        self,
        in_features: int,
        hidden_features: int,
        rngs: nnx.Rngs,
        *,
        gate_fn: Callable[[jax.Array], jax.Array] = nnx.sigmoid,
        activation_fn: Callable[[jax.Array], jax.Array] = nnx.tanh,
        kernel_init: Initializer = LECUN_NORMAL,
        recurrent_kernel_init: Initializer = ORTHOGONAL,
        bias_init: Initializer = ZEROS,
        use_optimized: bool = True,
        trainable_initial_state: bool = False,
        concat_inputs: bool = False,
        precision: str = DEFAULT_PRECISION,
    ):
        if isinstance(hidden_features, bool) or not isinstance(hidden_features, int):
            raise ValueError(
                f"LSTM hidden_features must be a positive int, got {hidden_features!r}"
            )
        if hidden_features <= 0:
            raise ValueError(
                f"LSTM hidden_features must be a positive int, got {hidden_features!r}"
            )
        precision = check_precision(precision)
        self.hidden_features = hidden_features
        self.cell: nnx.Module
        if concat_inputs:
            if recurrent_kernel_init is not ORTHOGONAL:
                raise ValueError(
                    "LSTM recurrent_kernel_init does not apply with concat_inputs=True "
                    "(kernel_init draws the whole [x, h] kernel)"
                )
            self.cell = ConcatLSTMCell(
                in_features,
                hidden_features,
                gate_fn=gate_fn,
                activation_fn=activation_fn,
                kernel_init=kernel_init,
                bias_init=bias_init,
                precision=precision,
                rngs=rngs,
            )
        else:
            if precision != DEFAULT_PRECISION:
                raise ValueError(
                    f"LSTM precision {precision!r} needs concat_inputs=True "
                    "(flax's cells compute in float32)"
                )
            cell = nnx.OptimizedLSTMCell if use_optimized else nnx.LSTMCell
            self.cell = cell(
                in_features,
                hidden_features,
                gate_fn=gate_fn,
                activation_fn=activation_fn,
                kernel_init=kernel_init,
                recurrent_kernel_init=recurrent_kernel_init,
                bias_init=bias_init,
                rngs=rngs,
            )
        initial = jnp.zeros((2, hidden_features), jnp.float32)
        self.initial_state = nnx.Param(initial) if trainable_initial_state else None

    def initialize_state(self, batch_size: int) -> tuple[jax.Array, jax.Array]:
        if self.initial_state is None:
            zeros = jnp.zeros((batch_size, self.hidden_features), jnp.float32)
            return (zeros, zeros)
        c0, h0 = self.initial_state[...]
        shape = (batch_size, self.hidden_features)
        return (jnp.broadcast_to(c0, shape), jnp.broadcast_to(h0, shape))

    def __call__(
        self, state: tuple[jax.Array, jax.Array], x: jax.Array, rollout_extras: Any = None
    ) -> StatefulOutput:
        (c, h), y = self.cell(state, x)
        return StatefulOutput((c, h), y, zero_loss(), {}, None)
