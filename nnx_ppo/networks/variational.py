"""Noisy latent bottlenecks: ``VariationalBottleneck`` and ``AR1VariationalBottleneck``.

The noise comes from per-env keys kept in the carry, each step splitting its key, so that the
loss replay, which starts from the rollout's first carry and resets where the rollout did,
draws exactly the rollout's latents. ``reset_state`` derives new keys from the old ones
(never from the module's RNG), for the same reason.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.networks.sampling_layers import as_rngs
from nnx_ppo.networks.types import StatefulOutput


class BottleneckKey(nnx.Variable):
    """The key the per-env noise keys of a new batch derive from (fixed after creation)."""


def kl_to_standard_normal(mean: jax.Array, std: jax.Array) -> jax.Array:
    """``KL(N(mean, std²) ‖ N(0, I))`` summed over the last axis:
    ``0.5 * Σ (mean² + std² - 1 - 2 log std)``."""
    return 0.5 * jnp.sum(jnp.square(mean) + jnp.square(std) - 1.0 - 2.0 * jnp.log(std), axis=-1)


def _split_keys(keys: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``[B, 2]`` raw keys to (next keys, keys to draw with), each ``[B, 2]``."""
    both = jax.vmap(lambda k: jax.random.split(k))(keys)
    return both[:, 0], both[:, 1]


class VariationalBottleneck(StatefulModule):
    """A reparameterized Gaussian latent with a KL penalty toward ``N(0, I)``.

    Input ``[B, 2L]`` = mean and log-std; output ``z = mean + std * eps``, ``[B, L]``, with
    ``std = exp(log_std) + min_std``; in eval mode (``module.eval()``) ``z = mean``. Adds
    ``kl_weight * mean_B KL(q ‖ N(0, I))`` to the regularization loss and reports ``kl`` (per
    env) in the metrics. The carry is the ``[B, 2]`` per-env keys.

    Args:
        latent_size: ``L``.
        rng: An ``nnx.Rngs``, a seed or a key; read once, for the base key.
        kl_weight: Weight of the KL term.
        min_std: Added to ``exp(log_std)``.
    """

    def __init__(self, latent_size: int, rng: Any, kl_weight: float = 1.0, min_std: float = 1e-6):
        if isinstance(latent_size, bool) or not isinstance(latent_size, int) or latent_size <= 0:
            raise ValueError(f"latent_size must be a positive int, got {latent_size!r}")
        if kl_weight < 0 or min_std < 0:
            raise ValueError(f"kl_weight and min_std must be >= 0, got {kl_weight=}, {min_std=}")
        self.latent_size = latent_size
        self.kl_weight = kl_weight
        self.min_std = min_std
        self.deterministic = False
        key = as_rngs(rng, "noise").noise()
        self.base_key = BottleneckKey(jax.random.key_data(key))

    def initialize_state(self, batch_size: int) -> Any:
        base = jax.random.wrap_key_data(self.base_key[...])
        return jax.random.key_data(jax.random.split(base, batch_size))

    def reset_state(self, prev_state: Any) -> Any:
        keys = self._keys(prev_state)
        fresh = jax.vmap(lambda k: jax.random.fold_in(k, 0x5EED))(keys)
        return self._with_keys(prev_state, fresh)

    def _keys(self, state: Any) -> jax.Array:
        return state

    def _with_keys(self, state: Any, keys: jax.Array) -> Any:
        del state
        return keys

    def sample(self, keys: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(z, kl, next_keys)`` for ``[B, 2L]`` inputs."""
        if x.shape[-1] != 2 * self.latent_size:
            raise ValueError(
                f"the bottleneck of latent_size {self.latent_size} takes [B, "
                f"{2 * self.latent_size}] (mean, log-std), got last axis {x.shape[-1]}"
            )
        mean, log_std = jnp.split(x, 2, axis=-1)
        std = jnp.exp(log_std) + self.min_std
        next_keys, draw = _split_keys(keys)
        if self.deterministic:
            z = mean
        else:
            eps = jax.vmap(lambda k: jax.random.normal(k, (self.latent_size,)))(draw)
            z = mean + std * eps.astype(mean.dtype)
        return z, kl_to_standard_normal(mean, std), next_keys

    def __call__(self, state: Any, x: jax.Array, rollout_extras: Any = None) -> StatefulOutput:
        z, kl, next_keys = self.sample(state, x)
        reg = self.kl_weight * jnp.mean(kl)
        return StatefulOutput(next_keys, z, reg, {"kl": kl}, None)


class AR1VariationalBottleneck(VariationalBottleneck):
    """``VariationalBottleneck`` plus a smoothness penalty on the latent trajectory.

    Adds ``ar1_weight * mean_B ‖z_t - z_{t-1}‖²`` to the regularization loss, for envs that
    have a previous latent in this episode (none at an episode's first step), and reports
    ``ar1`` (per env). The carry is ``{"keys", "prev_z", "has_prev"}``. With
    ``backprop_through_time=False`` the gradient does not flow into ``z_{t-1}``.

    Args:
        latent_size, rng, kl_weight, min_std: As for ``VariationalBottleneck``.
        ar1_weight: Weight of the AR(1) penalty.
        backprop_through_time: Let the penalty's gradient reach the previous step's latent.
    """

    def __init__(
        self,
        latent_size: int,
        rng: Any,
        kl_weight: float = 1.0,
        min_std: float = 1e-6,
        ar1_weight: float = 1.0,
        backprop_through_time: bool = True,
    ):
        super().__init__(latent_size, rng, kl_weight, min_std)
        if ar1_weight < 0:
            raise ValueError(f"ar1_weight must be >= 0, got {ar1_weight}")
        self.ar1_weight = ar1_weight
        self.backprop_through_time = backprop_through_time

    def initialize_state(self, batch_size: int) -> Any:
        return {
            "keys": super().initialize_state(batch_size),
            "prev_z": jnp.zeros((batch_size, self.latent_size), jnp.float32),
            "has_prev": jnp.zeros((batch_size,), bool),
        }

    def _keys(self, state: Any) -> jax.Array:
        return state["keys"]

    def _with_keys(self, state: Any, keys: jax.Array) -> Any:
        return {
            "keys": keys,
            "prev_z": jnp.zeros_like(state["prev_z"]),
            "has_prev": jnp.zeros_like(state["has_prev"]),
        }

    def __call__(self, state: Any, x: jax.Array, rollout_extras: Any = None) -> StatefulOutput:
        z, kl, next_keys = self.sample(state["keys"], x)
        prev = state["prev_z"]
        if not self.backprop_through_time:
            prev = jax.lax.stop_gradient(prev)
        ar1 = jnp.where(state["has_prev"], jnp.sum(jnp.square(z - prev), axis=-1), 0.0)
        reg = self.kl_weight * jnp.mean(kl) + self.ar1_weight * jnp.mean(ar1)
        next_state = {"keys": next_keys, "prev_z": z, "has_prev": jnp.ones_like(state["has_prev"])}
        return StatefulOutput(next_state, z, reg, {"kl": kl, "ar1": ar1}, None)
