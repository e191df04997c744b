"""``Dense``: a linear layer with an optional activation, as a carry-less ``StatefulModule``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from flax import nnx

from nnx_ppo.networks.base import StatefulModule, zero_loss
from nnx_ppo.networks.layers import activation_fn
from nnx_ppo.networks.types import StatefulOutput

Activation = str | Callable[[jax.Array], jax.Array] | None


def resolve_activation(activation: Activation) -> Callable[[jax.Array], jax.Array] | None:
    """A callable activation from a name (``"swish"``, ``"relu"``, ...), a callable or None."""
    if activation is None or callable(activation):
        return activation
    return activation_fn(activation)


class Dense(StatefulModule):
    """``activation(x @ W + b)``; no carry.

    Args:
        in_features: Input features.
        out_features: Output features.
        rngs: Streams for initialization.
        activation: None (affine output), an activation name or a callable.
        **linear_kwargs: Passed to ``nnx.Linear`` (``kernel_init``, ``use_bias``, ...).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        rngs: nnx.Rngs,
        activation: Activation = None,
        **linear_kwargs: Any,
    ):
        for name, size in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
                raise ValueError(f"Dense {name} must be a positive int, got {size!r}")
        self.in_features = in_features
        self.out_features = out_features
        self.activation = resolve_activation(activation)
        self.linear = nnx.Linear(in_features, out_features, rngs=rngs, **linear_kwargs)

    def __call__(self, state: Any, x: jax.Array, rollout_extras: Any = None) -> StatefulOutput:
        y = self.linear(x)
        if self.activation is not None:
            y = self.activation(y)
        return StatefulOutput(state, y, zero_loss(), {}, None)
