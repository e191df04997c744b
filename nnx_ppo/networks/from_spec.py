"""``make_networks``: a network from a run spec's ``network`` section.

``presets`` re-exports it (its old home); it lives here so that the algorithms (a
distillation teacher) can build a network without importing the presets, which import the
algorithms' configs.
"""

from __future__ import annotations

from typing import Any

from flax import nnx

from nnx_ppo import plugins
from nnx_ppo.networks import factories
from nnx_ppo.networks.base import StatefulModule


def make_networks(
    network: dict[str, Any], obs_size: Any, action_size: Any, seed: int
) -> StatefulModule:
    """Builds a network from a spec ``{"kind": "mlp" | "lstm" | "graph", **factory fields}``, or
    ``{"kind": "plugin:<name>", "kwargs": {...}}`` for a plugin network
    (``nnx_ppo.plugins``)."""
    fields = dict(network)
    kind = fields.pop("kind", "mlp")
    if isinstance(kind, str) and kind.startswith(plugins.KIND_PREFIX):
        kwargs = fields.pop("kwargs", None) or {}
        if fields:
            raise ValueError(
                f"network kind {kind!r} takes its factory's arguments in kwargs, not "
                f"{sorted(fields)}"
            )
        if "rngs" in kwargs:
            raise plugins.PluginArgumentError(
                "rngs", f"network kind {kind!r}: rngs comes from the run's seed, not kwargs"
            )
        fields = dict(kwargs)
    elif kind not in factories.FACTORIES:
        raise ValueError(f"network kind must be 'mlp', 'lstm' or 'graph', got {kind!r}")
    factory = factories.factory_for(kind)
    return factory(obs_size, action_size, rngs=nnx.Rngs(seed), **fields)
