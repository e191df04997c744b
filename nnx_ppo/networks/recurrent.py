"""``LSTM``: an LSTM cell as a ``StatefulModule`` whose carry is ``(c, h)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.networks.base import StatefulModule, zero_loss
from nnx_ppo.networks.types import StatefulOutput

Initializer = Callable[..., jax.Array]

LECUN_NORMAL = nnx.initializers.lecun_normal()
ORTHOGONAL = nnx.initializers.orthogonal()
ZEROS = nnx.initializers.zeros_init()


class LSTM(StatefulModule):
    """One LSTM cell (``nnx.OptimizedLSTMCell`` or ``nnx.LSTMCell``); output ``h``.

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
    ):
        if isinstance(hidden_features, bool) or not isinstance(hidden_features, int):
            raise ValueError(
                f"LSTM hidden_features must be a positive int, got {hidden_features!r}"
            )
        if hidden_features <= 0:
            raise ValueError(
                f"LSTM hidden_features must be a positive int, got {hidden_features!r}"
            )
        cell = nnx.OptimizedLSTMCell if use_optimized else nnx.LSTMCell
        self.hidden_features = hidden_features
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
