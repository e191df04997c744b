"""Metrics computation and logging utilities for PPO training.

Keys are namespaced by group: ``losses/``, ``critic/``, ``actor/``, ``rollout/``,
``obs/``, ``env/``, ``network/``, ``optimizer/``, ``weights/``, ``throughput/``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import PyTree

from nnx_ppo.algorithms.action_heads import heads_of
from nnx_ppo.algorithms.streams import stream_names
from nnx_ppo.algorithms.types import LoggingLevel, Transition

_LOSS_PREFIXES = {
    "losses/": LoggingLevel.LOSSES,
    "critic/": LoggingLevel.CRITIC_EXTRA,
    "actor/": LoggingLevel.ACTOR_EXTRA,
    "optimizer/": LoggingLevel.GRAD_NORM,
}


def describe(
    name: str, values: jax.Array, percentile_levels: tuple[int, ...] | None
) -> dict[str, jax.Array]:
    """Summary statistics of ``values``: ``{name}/mean`` and ``{name}/std``, or one
    ``{name}/p{q}`` per percentile when ``percentile_levels`` is given."""
    values = jnp.asarray(values, jnp.float32).reshape(-1)
    if percentile_levels is None:
        return {f"{name}/mean": jnp.mean(values), f"{name}/std": jnp.std(values)}
    qs = jnp.percentile(values, jnp.asarray(percentile_levels, jnp.float32))
    return {f"{name}/p{int(q)}": qs[i] for i, q in enumerate(percentile_levels)}


def compute_metrics(
    loss_metrics: dict[str, PyTree],
    rollout_data: Transition,
    logging_level: LoggingLevel,
    percentile_levels: tuple[int, ...] | None = None,
) -> dict[str, Any]:
    """Compute training metrics from loss metrics and rollout data.

    Args:
        loss_metrics: Dictionary of loss values from ppo_loss (already averaged).
        rollout_data: Transition data from the rollout, ``[T, B]`` leaves.
        logging_level: Which metrics to include.
        percentile_levels: Percentiles to compute (e.g., (0, 25, 50, 75, 100)). If None,
            uses mean/std instead.

    Returns:
        Dictionary of computed metrics.
    """
    metrics: dict[str, Any] = {}
    for key, value in loss_metrics.items():
        group = next((g for p, g in _LOSS_PREFIXES.items() if key.startswith(p)), None)
        if group is None or logging_level & group:
            metrics[key] = value
    if logging_level & LoggingLevel.ROLLOUT_STATS:
        for name, reward in stream_names(rollout_data.rewards):
            key = f"rollout/reward/{name}" if name else "rollout/reward"
            metrics.update(describe(key, reward, percentile_levels))
        metrics["rollout/done_fraction"] = jnp.mean(rollout_data.done)
        metrics["rollout/truncated_fraction"] = jnp.mean(rollout_data.truncated)
        output = rollout_data.network_output
        for head, actions in heads_of(output.actions).items():
            key = f"rollout/action/{head}" if head else "rollout/action"
            metrics.update(describe(key, actions, percentile_levels))
    if logging_level & LoggingLevel.ROLLOUT_OBS:
        for i, leaf in enumerate(jax.tree.leaves(rollout_data.obs)):
            flat = leaf.reshape(-1, leaf.shape[-1]) if leaf.ndim > 2 else leaf.reshape(-1, 1)
            for d in range(flat.shape[-1]):
                metrics[f"obs/{i}_{d}/mean"] = jnp.mean(flat[:, d])
                metrics[f"obs/{i}_{d}/std"] = jnp.std(flat[:, d])
    if logging_level & LoggingLevel.ENV_METRICS:
        for key, value in rollout_data.metrics.items():
            metrics[f"env/{key}"] = jnp.mean(value)
    if logging_level & LoggingLevel.NETWORK_METRICS:
        for key, value in rollout_data.network_output.metrics.items():
            metrics.update(describe(f"network/{key}", value, percentile_levels))
    return metrics


def log_weight_stats(
    metrics: dict[str, Any],
    networks: nnx.Module,
    percentile_levels: tuple[int, ...] | None = None,
) -> None:
    """Log weight statistics over all of the network's parameters.

    Adds ``weights/...`` summaries of every parameter (pooled) and ``weights/norm``.

    Args:
        metrics: Dictionary to add metrics to (mutated in place).
        networks: The PPO network to extract weights from.
        percentile_levels: Percentiles to compute. If None, uses mean/std.
    """
    leaves = jax.tree.leaves(nnx.state(networks, nnx.Param))
    if not leaves:
        return
    flat = jnp.concatenate([jnp.ravel(x) for x in leaves])
    metrics.update(describe("weights/all", flat, percentile_levels))
    metrics["weights/norm"] = jnp.sqrt(jnp.sum(jnp.square(flat)))
    metrics["weights/max_abs"] = jnp.max(jnp.abs(flat))
