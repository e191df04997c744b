"""``NormalTanhSampler``: samples tanh-squashed Gaussian actions and scores them.

Its output is a *sampler dict*: ``{"action", "log_likelihood"}`` plus what a replay and
distillation need (``raw_action``, ``loc``, ``scale``); ``adapter.PPOAdapter`` packs sampler
dicts into the trainer's ``PPONetworkOutput``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.networks.samplers import normal_log_prob, squashed_entropy, tanh_log_det_jacobian
from nnx_ppo.networks.types import StatefulOutput


def as_rngs(rng: Any, stream: str) -> nnx.Rngs:
    """``rng`` as an ``nnx.Rngs``: an ``nnx.Rngs`` as it is, a seed or a key as ``stream``."""
    if isinstance(rng, nnx.Rngs):
        return rng
    return nnx.Rngs(**{stream: rng})


class NormalTanhSampler(StatefulModule):
    """Samples ``tanh(N(loc, scale))`` actions from ``[B, 2A]`` = mean and raw std.

    ``scale = std_scale * softplus(raw std) + min_std``. The action is ``tanh(raw_action)``
    with ``raw_action = loc + scale * noise``; in eval mode (``module.eval()``) it is
    ``tanh(loc)``. ``rollout_extras`` is the raw action: given back in the loss replay, it
    is re-scored under the current parameters instead of a new one being drawn. The
    regularization loss is ``-entropy_weight * mean(entropy)``, the entropy being the
    normal's plus the tanh log-Jacobian at the action (a reparameterized estimate).

    Args:
        rng: An ``nnx.Rngs`` (its ``action`` stream, or ``default``), a seed or a key.
        entropy_weight: Weight of the entropy bonus, ``>= 0``.
        min_std: Floor of the scale.
        std_scale: Multiplies the softplus of the raw std.
    """

    def __init__(
        self, rng: Any, entropy_weight: float, min_std: float = 0.001, std_scale: float = 1.0
    ):
        if entropy_weight < 0:
            raise ValueError(f"entropy_weight must be >= 0, got {entropy_weight}")
        if min_std < 0 or std_scale <= 0:
            raise ValueError(
                f"min_std must be >= 0 and std_scale > 0, got {min_std=}, {std_scale=}"
            )
        self.rngs = as_rngs(rng, "action")
        self.entropy_weight = entropy_weight
        self.min_std = min_std
        self.std_scale = std_scale
        self.deterministic = False

    def distribution(self, params: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(loc, scale)``, each ``[B, A]``, from ``[B, 2A]`` parameters."""
        if params.shape[-1] % 2:
            raise ValueError(
                f"NormalTanhSampler takes [B, 2A] (mean, raw std), got last axis {params.shape[-1]}"
            )
        loc, raw_std = jnp.split(params, 2, axis=-1)
        return loc, self.std_scale * jax.nn.softplus(raw_std) + self.min_std

    def __call__(
        self, state: Any, x: jax.Array, rollout_extras: jax.Array | None = None
    ) -> StatefulOutput:
        loc, scale = self.distribution(x)
        if rollout_extras is not None:
            raw = rollout_extras
        elif self.deterministic:
            raw = loc
        else:
            raw = loc + scale * jax.random.normal(self.rngs.action(), loc.shape, loc.dtype)
        log_likelihood = normal_log_prob(raw, loc, scale) - tanh_log_det_jacobian(raw)
        entropy = squashed_entropy(raw, loc, scale)
        output = {
            "action": jnp.tanh(raw),
            "log_likelihood": log_likelihood,
            "raw_action": raw,
            "loc": loc,
            "scale": scale,
        }
        metrics = {"entropy": entropy, "action_std": jnp.mean(scale, axis=-1)}
        reg = -self.entropy_weight * jnp.mean(entropy)
        return StatefulOutput(state, output, reg, metrics, raw)
