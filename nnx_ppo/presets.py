"""Tuned starting points: an env, its network and a ``TrainConfig`` that learn it well.

``PRESETS["CartpoleBalance"]`` reaches a deterministic eval reward above 900 (of 1000) in
about 4-6M env steps, a couple of minutes on a 2-core CPU (``bench/learning.py`` measures it
for several seeds).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flax import nnx

from nnx_ppo.algorithms.config import EvalConfig, PPOConfig, TrainConfig
from nnx_ppo.networks import factories
from nnx_ppo.networks.base import StatefulModule


@dataclasses.dataclass(frozen=True)
class Preset:
    """A named training setup.

    Attributes:
        env: Name for ``nnx_ppo.envs.load``.
        env_overrides: Env config overrides.
        network: ``{"kind": "mlp" | "lstm", **factory keyword arguments}``.
        config: The training configuration.
    """

    env: str
    env_overrides: dict[str, Any]
    network: dict[str, Any]
    config: TrainConfig

    def make_networks(self, obs_size: Any, action_size: int, seed: int) -> StatefulModule:
        """Builds this preset's network for an env with these sizes."""
        return make_networks(self.network, obs_size, action_size, seed)


def make_networks(
    network: dict[str, Any], obs_size: Any, action_size: int, seed: int
) -> StatefulModule:
    """Builds a network from a spec ``{"kind": "mlp" | "lstm", **factory fields}``."""
    fields = dict(network)
    kind = fields.pop("kind", "mlp")
    factory = {
        "mlp": factories.make_mlp_actor_critic,
        "lstm": factories.make_lstm_actor_critic,
    }.get(kind)
    if factory is None:
        raise ValueError(f"network kind must be 'mlp' or 'lstm', got {kind!r}")
    return factory(obs_size, action_size, rngs=nnx.Rngs(seed), **fields)


PRESETS: dict[str, Preset] = {
    "CartpoleBalance": Preset(
        env="CartpoleBalance",
        env_overrides={},
        network={
            "kind": "mlp",
            "actor_hidden_sizes": (32, 32),
            "critic_hidden_sizes": (64, 64),
            "normalize_obs": True,
            "entropy_weight": 1e-2,
        },
        config=TrainConfig(
            ppo=PPOConfig(
                n_envs=512,
                rollout_length=32,
                total_steps=10_000_000,
                discounting_factor=0.995,
                learning_rate=1e-3,
                n_minibatches=8,
                n_epochs=4,
                anneal_learning_rate=True,
            ),
            eval=EvalConfig(every_steps=250_000, n_envs=64, max_episode_length=1000),
        ),
    ),
}
