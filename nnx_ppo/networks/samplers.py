"""Action samplers: turn distribution parameters into actions and log-likelihoods."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.networks.types import StatefulOutput

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def tanh_log_det_jacobian(raw: jax.Array) -> jax.Array:
    """``log |d tanh(x) / dx|`` summed over the last axis, computed stably.

    ``log(1 - tanh(x)^2) = 2 * (log 2 - x - softplus(-2x))``.
    """
    return jnp.sum(2.0 * (math.log(2.0) - raw - jax.nn.softplus(-2.0 * raw)), axis=-1)


def normal_log_prob(x: jax.Array, loc: jax.Array, scale: jax.Array) -> jax.Array:
    """Log-density of a diagonal normal, summed over the last axis."""
    z = (x - loc) / scale
    return jnp.sum(-0.5 * jnp.square(z) - jnp.log(scale) - _HALF_LOG_2PI, axis=-1)


def squashed_entropy(raw: jax.Array, loc: jax.Array, scale: jax.Array) -> jax.Array:
    """Entropy of the tanh-squashed normal: the normal's entropy plus E[log |J|], the
    expectation estimated at the sampled ``raw`` action, reparameterized so that its
    gradient penalizes scales (and means) that push actions into tanh's flat tails."""
    noise = jax.lax.stop_gradient((raw - loc) / scale)
    normal_entropy = jnp.sum(0.5 + _HALF_LOG_2PI + jnp.log(scale), axis=-1)
    return normal_entropy + tanh_log_det_jacobian(loc + scale * noise)


class TanhNormalSampler(StatefulModule):
    """Samples ``tanh(N(loc, scale))`` actions from ``[B, 2A]`` parameters.

    The first ``A`` parameters are the mean, the last ``A`` pass through
    ``std_scale * softplus(.) + min_std`` to give the scale. In eval mode
    (``module.eval()``) the action
    is ``tanh(loc)``. The entropy estimate is the normal's entropy plus the tanh
    log-Jacobian at the action taken (reparameterized); ``-entropy_weight * mean(entropy)``
    is the regularization loss.

    ``rollout_extras`` is the raw (pre-tanh) action: given back during a replay, the sampler
    scores that action instead of drawing a new one.

    Args:
        action_size: ``A``.
        rngs: Must provide an ``action`` stream for sampling.
        entropy_weight: Weight of the entropy bonus.
        min_std: Floor added to the softplus scale.
        std_scale: Multiplies the softplus of the raw scale.
    """

    def __init__(
        self,
        action_size: int,
        *,
        rngs: nnx.Rngs,
        entropy_weight: float = 1e-2,
        min_std: float = 1e-3,
        std_scale: float = 1.0,
    ):
        if action_size <= 0:
            raise ValueError(f"action_size must be positive, got {action_size}")
        if entropy_weight < 0:
            raise ValueError(f"entropy_weight must be >= 0, got {entropy_weight}")
        self.action_size = action_size
        self.entropy_weight = entropy_weight
        self.min_std = min_std
        self.std_scale = std_scale
        self.deterministic = False
        self.rngs = rngs

    def distribution(self, params: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(loc, scale)``, each ``[B, A]``."""
        loc, pre_scale = jnp.split(params, 2, axis=-1)
        scale = jax.nn.softplus(pre_scale)
        if self.std_scale != 1.0:  # as before std_scale existed, to the bit
            scale = self.std_scale * scale
        return loc, scale + self.min_std

    def __call__(
        self, state: Any, params: jax.Array, rollout_extras: jax.Array | None = None
    ) -> StatefulOutput:
        loc, scale = self.distribution(params)
        if rollout_extras is not None:
            raw = rollout_extras
        elif self.deterministic:
            raw = loc
        else:
            raw = loc + scale * jax.random.normal(self.rngs.action(), loc.shape, loc.dtype)
        log_det = tanh_log_det_jacobian(raw)
        loglik = normal_log_prob(raw, loc, scale) - log_det
        entropy = squashed_entropy(raw, loc, scale)
        output = {
            "actions": jnp.tanh(raw),
            "raw_actions": raw,
            "loglikelihoods": loglik,
            "loc": loc,
            "scale": scale,
        }
        metrics = {"entropy": entropy, "action_std": jnp.mean(scale, axis=-1)}
        reg = -self.entropy_weight * jnp.mean(entropy)
        return StatefulOutput(state, output, reg, metrics, raw)
