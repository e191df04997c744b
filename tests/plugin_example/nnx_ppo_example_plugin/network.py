"""``tiny``: a PPO network whose policy torso is a custom ``StatefulModule``.

The torso (``GatedTorso``) gates a tanh layer with a sigmoid one; the value is an MLP;
nnx-ppo's ``PPONetwork`` puts them together with its tanh-normal sampler, so the network's
output is a ``PPONetworkOutput``.
"""

from __future__ import annotations

from typing import Any, Literal

import jax
from flax import nnx

from nnx_ppo.networks.actor_critic import PPONetwork
from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.networks.layers import MLP
from nnx_ppo.networks.normalizer import Normalizer, flat_size, obs_shapes
from nnx_ppo.networks.samplers import TanhNormalSampler
from nnx_ppo.networks.types import StatefulOutput


class GatedTorso(StatefulModule):
    """``out(tanh(a(x)) * sigmoid(g(x)))``: stateless, ``[B, n_in] -> [B, n_out]``."""

    def __init__(self, n_in: int, hidden: int, n_out: int, *, rngs: nnx.Rngs):
        self.a = nnx.Linear(n_in, hidden, rngs=rngs)
        self.g = nnx.Linear(n_in, hidden, rngs=rngs)
        self.out = nnx.Linear(hidden, n_out, rngs=rngs)

    def __call__(self, state: Any, obs: jax.Array, rollout_extras: Any = None) -> StatefulOutput:
        hidden = jax.numpy.tanh(self.a(obs)) * jax.nn.sigmoid(self.g(obs))
        return StatefulOutput(state, self.out(hidden), jax.numpy.zeros(()), {}, None)


def make_tiny_network(
    obs_size: Any,
    action_size: int,
    *,
    rngs: nnx.Rngs,
    hidden: int = 16,
    value_sizes: tuple[int, ...] = (16,),
    normalize: Literal["running", "none"] = "running",
) -> PPONetwork:
    """The entry point (``nnx_ppo.networks``: ``tiny``; ``network.kind = "plugin:tiny"``)."""
    if hidden <= 0:
        raise ValueError(f"hidden must be positive, got {hidden}")
    n_in = flat_size(obs_size)
    actor = GatedTorso(n_in, hidden, 2 * action_size, rngs=rngs)
    critic = MLP((n_in, *value_sizes, 1), rngs=rngs)
    sampler = TanhNormalSampler(action_size, rngs=rngs)
    normalizer = Normalizer(obs_size) if normalize == "running" else None
    return PPONetwork(actor, critic, sampler, normalizer, obs_shapes(obs_size))
