"""Output types shared by networks and algorithms."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
from flax import struct


class StatefulOutput(NamedTuple):
    """What a ``StatefulModule`` call returns.

    Attributes:
        next_state: The module's state after this step (``[B, ...]`` leaves).
        output: The module's output for this step.
        regularization_loss: Scalar added to the training loss (e.g. minus the weighted
            entropy of an action distribution).
        metrics: Scalars or ``[B]`` arrays describing this call, keyed by name.
        rollout_extras: What the module needs to replay this step exactly (e.g. the sampled
            raw action); passed back as ``rollout_extras`` during the loss replay.
    """

    next_state: Any
    output: Any
    regularization_loss: jax.Array
    metrics: dict[str, jax.Array]
    rollout_extras: Any


StatefulModuleOutput = StatefulOutput
"""The name the composable networks interface (``networks-api.md``) gives ``StatefulOutput``."""


def __getattr__(name: str) -> Any:
    # ``StatefulModule`` is defined in ``base`` (which imports this module); the networks
    # interface names it from here too.
    if name == "StatefulModule":
        from nnx_ppo.networks.base import StatefulModule

        return StatefulModule
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
