"""Feed-forward and recurrent layers as ``StatefulModule``s: ``Dense``, ``MLP``, ``LSTM``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.networks.base import StatefulModule, zero_loss
from nnx_ppo.networks.precision import DEFAULT_PRECISION, linear_kwargs
from nnx_ppo.networks.types import StatefulOutput

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "swish": nnx.swish,
    "relu": nnx.relu,
    "tanh": jnp.tanh,
    "elu": nnx.elu,
    "gelu": nnx.gelu,
}


def activation_fn(name: str) -> Callable[[jax.Array], jax.Array]:
    """The activation called ``name``; ValueError listing the known ones otherwise."""
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name]


def scaled_lecun_uniform(scale: float) -> Any:
    """Lecun-uniform initial weights times ``scale``."""
    base = nnx.initializers.lecun_uniform()

    def init(key: jax.Array, shape: Sequence[int], dtype: Any = jnp.float32) -> jax.Array:
        return base(key, shape, dtype) * scale

    return init


class Dense(StatefulModule):
    """A stateless affine layer ``x @ W + b`` with Lecun-uniform weights.

    Args:
        in_size: Input features.
        out_size: Output features.
        rngs: Random number streams for initialization.
        kernel_scale: Multiplies the initial weights (small values make near-zero outputs,
            useful for a policy's last layer).
        precision: ``"float32"`` or ``"bfloat16"``: the arithmetic of the product
            (``nnx_ppo.networks.precision``); parameters and output are float32 either way.
    """

    def __init__(
        self,
        in_size: int,
        out_size: int,
        *,
        rngs: nnx.Rngs,
        kernel_scale: float = 1.0,
        precision: str = DEFAULT_PRECISION,
    ):
        self.linear = nnx.Linear(
            in_size,
            out_size,
            kernel_init=scaled_lecun_uniform(kernel_scale),
            rngs=rngs,
            **linear_kwargs(precision),
        )

    def __call__(self, state: Any, obs: jax.Array, rollout_extras: Any = None) -> StatefulOutput:
        return StatefulOutput(state, self.linear(obs), zero_loss(), {}, None)


class MLP(StatefulModule):
    """A stateless multi-layer perceptron; the last layer has no activation.

    Args:
        sizes: ``(in, hidden..., out)`` feature sizes; at least two entries.
        rngs: Random number streams for initialization.
        activation: Name of the hidden activation (see ``ACTIVATIONS``).
        initializer_scale: Multiplies every layer's initial weights.
        last_layer_scale: Multiplies the last layer's initial weights once more.
        precision: The arithmetic of every layer's product (see ``Dense``).
    """

    def __init__(
        self,
        sizes: Sequence[int],
        *,
        rngs: nnx.Rngs,
        activation: str = "swish",
        initializer_scale: float = 1.0,
        last_layer_scale: float = 1.0,
        precision: str = DEFAULT_PRECISION,
    ):
        if len(sizes) < 2 or any(int(s) <= 0 for s in sizes):
            raise ValueError(f"MLP sizes must be >= 2 positive integers, got {list(sizes)}")
        self.activation = activation
        self._act = activation_fn(activation)
        n_layers = len(sizes) - 1
        self.layers = nnx.List(
            [
                Dense(
                    sizes[i],
                    sizes[i + 1],
                    rngs=rngs,
                    kernel_scale=initializer_scale
                    * (last_layer_scale if i == n_layers - 1 else 1.0),
                    precision=precision,
                )
                for i in range(n_layers)
            ]
        )

    def __call__(self, state: Any, obs: jax.Array, rollout_extras: Any = None) -> StatefulOutput:
        x = obs
        for i, layer in enumerate(self.layers):
            x = layer.linear(x)
            if i < len(self.layers) - 1:
                x = self._act(x)
        return StatefulOutput(state, x, zero_loss(), {}, None)


class LSTM(StatefulModule):
    """A single LSTM layer; its state is ``(h, c)``, each ``[B, hidden_size]``.

    The four gates come from one fused affine map of ``[x, h]``; the forget gate's bias
    starts at 1 so that memory is kept early in training.

    Args:
        in_size: Input features.
        hidden_size: Units.
        rngs: Random number streams for initialization.
        precision: The arithmetic of the gates' product (see ``Dense``); the cell state
            and the gates' nonlinearities stay float32.
    """

    def __init__(
        self,
        in_size: int,
        hidden_size: int,
        *,
        rngs: nnx.Rngs,
        precision: str = DEFAULT_PRECISION,
    ):
        if hidden_size <= 0:
            raise ValueError(f"LSTM hidden_size must be positive, got {hidden_size}")
        self.hidden_size = hidden_size
        self.gates = nnx.Linear(
            in_size + hidden_size, 4 * hidden_size, rngs=rngs, **linear_kwargs(precision)
        )
        bias = jnp.zeros((4 * hidden_size,)).at[hidden_size : 2 * hidden_size].set(1.0)
        self.gates.bias[...] = bias  # type: ignore[index]  # Linear has a bias here

    def initialize_state(self, batch_size: int) -> tuple[jax.Array, jax.Array]:
        zeros = jnp.zeros((batch_size, self.hidden_size), jnp.float32)
        return (zeros, zeros)

    def __call__(
        self, state: tuple[jax.Array, jax.Array], obs: jax.Array, rollout_extras: Any = None
    ) -> StatefulOutput:
        h, c = state
        z = self.gates(jnp.concatenate([obs, h], axis=-1))
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c = nnx.sigmoid(f) * c + nnx.sigmoid(i) * jnp.tanh(g)
        h = nnx.sigmoid(o) * jnp.tanh(c)
        return StatefulOutput((h, c), h, zero_loss(), {}, None)


class Sequential(StatefulModule):
    """Runs ``StatefulModule``s one after the other; the state is a tuple, one per module."""

    def __init__(self, *modules: StatefulModule):
        self.modules = nnx.List(list(modules))

    def initialize_state(self, batch_size: int) -> tuple[Any, ...]:
        return tuple(m.initialize_state(batch_size) for m in self.modules)

    def reset_state(self, state: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(m.reset_state(s) for m, s in zip(self.modules, state, strict=True))

    def __call__(
        self, state: tuple[Any, ...], obs: Any, rollout_extras: Any = None
    ) -> StatefulOutput:
        extras = rollout_extras if rollout_extras is not None else (None,) * len(self.modules)
        next_states, new_extras, metrics = [], [], {}
        loss = zero_loss()
        x = obs
        for module, s, e in zip(self.modules, state, extras, strict=True):
            out = module(s, x, e)
            next_states.append(out.next_state)
            new_extras.append(out.rollout_extras)
            metrics.update(out.metrics)
            loss = loss + out.regularization_loss
            x = out.output
        return StatefulOutput(tuple(next_states), x, loss, metrics, tuple(new_extras))
