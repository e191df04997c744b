"""Running-statistics observation normalizer for array and pytree (dict) observations."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.networks.base import StatefulModule, zero_loss
from nnx_ppo.networks.types import StatefulOutput

ObsShape = int | tuple[int, ...]


class NormalizerStatistics(nnx.Variable):
    """Running observation statistics: not a parameter, never touched by the optimizer."""


def _as_shape(size: ObsShape) -> tuple[int, ...]:
    return (int(size),) if isinstance(size, int) else tuple(int(s) for s in size)


def obs_shapes(obs_size: Any) -> Any:
    """Normalizes an ``observation_size`` (int, shape tuple, or dict of them) to shapes."""
    if isinstance(obs_size, dict):
        return {k: _as_shape(v) for k, v in sorted(obs_size.items())}
    return _as_shape(obs_size)


def flat_size(obs_size: Any) -> int:
    """Number of features once every observation leaf is flattened and concatenated."""
    shapes = obs_shapes(obs_size)
    leaves = shapes.values() if isinstance(shapes, dict) else [shapes]
    total = 0
    for shape in leaves:
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def flatten_obs(obs: Any, shapes: Any) -> jax.Array:
    """Concatenates observation leaves into ``[..., features]`` (dict keys in sorted order)."""
    if isinstance(shapes, dict):
        parts = [_flatten_leaf(obs[k], shape) for k, shape in shapes.items()]
        return jnp.concatenate(parts, axis=-1)
    return _flatten_leaf(obs, shapes)


def _flatten_leaf(leaf: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    batch_dims = leaf.shape[: leaf.ndim - len(shape)]
    return leaf.reshape(*batch_dims, -1)


class Normalizer(StatefulModule):
    """Flattens observations and standardizes them with a running mean and variance.

    Statistics change only through ``update_statistics`` (PPO calls it after each step
    with the rollout's observations), never through gradients. Two guards keep a narrow
    first batch from producing huge inputs: the standard deviation is floored at
    ``std_min``, and normalized values are clipped to ``[-clip, clip]``.

    As a layer (``__call__``, e.g. in ``containers.Sequential``) the output has the
    observation's structure: each leaf standardized and in its own shape (a dict stays a
    dict, so a ``graph.PopulationGraph`` after it reads its keys). ``normalize`` gives the
    flattened features instead (what ``PPONetwork`` uses).

    Args:
        obs_size: ``observation_size`` of the env: an int, a shape, or a dict of them.
        shape: The same as ``obs_size``, under the name the networks interface gives it
            (``Normalizer(shape)``); pass one of the two.
        std_min: Smallest standard deviation used for scaling.
        clip: Normalized values are clipped to this magnitude.
    """

    def __init__(
        self,
        obs_size: Any = None,
        *,
        shape: Any = None,
        std_min: float = 1e-2,
        clip: float = 10.0,
    ):
        if (obs_size is None) == (shape is None):
            raise ValueError(
                "Normalizer takes one of obs_size and shape (the same thing: an int, a shape, "
                f"or a dict of them), got obs_size={obs_size!r}, shape={shape!r}"
            )
        obs_size = obs_size if shape is None else shape
        self.shapes = obs_shapes(obs_size)
        self.std_min = std_min
        self.clip = clip
        n_features = flat_size(obs_size)
        self.mean = NormalizerStatistics(jnp.zeros((n_features,), jnp.float32))
        self.m2 = NormalizerStatistics(jnp.zeros((n_features,), jnp.float32))
        self.count = NormalizerStatistics(jnp.zeros((), jnp.float32))

    def normalize(self, obs: Any) -> jax.Array:
        """Flattened, standardized and clipped observations, ``[..., features]``."""
        return self.standardize(flatten_obs(obs, self.shapes))

    def standardize(self, x: jax.Array, features: tuple[int, int] | None = None) -> jax.Array:
        """Standardized and clipped flat features ``x``, ``[..., n]``: all of them, or the
        ``(start, stop)`` slice ``features`` of them alone (each feature has its own
        statistics, so a slice standardizes as it does inside the whole)."""
        mean, m2 = self.mean[...], self.m2[...]
        if features is not None:
            mean, m2 = mean[features[0] : features[1]], m2[features[0] : features[1]]
        std = jnp.maximum(jnp.sqrt(m2 / jnp.maximum(self.count[...], 1.0)), self.std_min)
        return jnp.clip((x - mean) / std, -self.clip, self.clip)

    def __call__(self, state: Any, obs: Any, rollout_extras: Any = None) -> StatefulOutput:
        return StatefulOutput(state, self.restructure(self.normalize(obs)), zero_loss(), {}, None)

    def restructure(self, features: jax.Array) -> Any:
        """Flat ``[..., features]`` back to the observation's structure and leaf shapes."""
        shapes = self.shapes if isinstance(self.shapes, dict) else {None: self.shapes}
        batch_dims = features.shape[:-1]
        leaves, start = {}, 0
        for key, shape in shapes.items():
            size = math.prod(shape)
            leaves[key] = features[..., start : start + size].reshape(*batch_dims, *shape)
            start += size
        return leaves if isinstance(self.shapes, dict) else leaves[None]

    def update_statistics(self, obs: Any, mask: jax.Array | None = None) -> None:
        """Merges a batch of observations into the running statistics (Chan et al.).

        Args:
            obs: Observations with any leading batch axes (e.g. ``[T, B, ...]``).
            mask: Optional boolean mask over the leading axes; False entries are ignored.
        """
        x = flatten_obs(obs, self.shapes)
        x = x.reshape(-1, x.shape[-1]).astype(jnp.float32)
        w = jnp.ones((x.shape[0],), jnp.float32) if mask is None else mask.reshape(-1)
        w = w.astype(jnp.float32)[:, None]
        n = jnp.sum(w)
        count = self.count[...]
        total = count + n
        batch_mean = jnp.sum(w * x, axis=0) / jnp.maximum(n, 1.0)
        batch_m2 = jnp.sum(w * jnp.square(x - batch_mean), axis=0)
        delta = batch_mean - self.mean[...]
        frac = n / jnp.maximum(total, 1.0)
        self.mean[...] = self.mean[...] + delta * frac
        self.m2[...] = self.m2[...] + batch_m2 + jnp.square(delta) * count * frac
        self.count[...] = total
