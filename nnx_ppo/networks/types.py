"""Output types shared by networks and algorithms, and the names the composable networks
interface (``networks-api.md``) gives them: ``StatefulModule`` (defined in ``base``),
``StatefulOutput`` (defined in ``stateful_output``) and ``StatefulModuleOutput``."""

from __future__ import annotations

from typing import Any

import jax
from flax import struct

from nnx_ppo.networks.base import StatefulModule as StatefulModule
from nnx_ppo.networks.stateful_output import StatefulOutput as StatefulOutput

StatefulModuleOutput = StatefulOutput
"""The name the composable networks interface (``networks-api.md``) gives ``StatefulOutput``."""


class PPONetworkOutput(struct.PyTreeNode):
    """One step of an actor-critic network, for a batch ``[B]`` (or a rollout ``[T, B]``).

    Attributes:
        actions: Actions sent to the env, in [-1, 1], ``[B, A]``.
        raw_actions: Pre-squash actions (the tanh-normal sample), ``[B, A]``.
        loglikelihoods: Log-likelihood of ``raw_actions`` under the policy, ``[B]``.
        value_estimates: Critic output, ``[B]`` (a pytree for several reward streams).
        regularization_loss: Scalar regularization (entropy bonus and the like).
        metrics: Network metrics (e.g. entropy, action std).
        distribution_params: Parameters of the action distribution (``loc``, ``scale``).
    """

    actions: jax.Array
    raw_actions: jax.Array
    loglikelihoods: jax.Array
    value_estimates: Any
    regularization_loss: jax.Array
    metrics: dict[str, Any]
    distribution_params: dict[str, jax.Array]
