"""The ``StatefulModule`` base class: a module that carries per-env state between steps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.networks.stateful_output import StatefulOutput

_recorder: Callable[[Any], Any] | None = None
"""``recording.with_recording``, installed by ``install_recorder`` when ``recording`` is
imported (the ``nnx_ppo.networks`` package imports it): the recording wrappers subclass
``StatefulModule``, so this module cannot import them."""


def install_recorder(recorder: Callable[[Any], Any]) -> None:
    """Makes ``recorder`` the implementation of ``StatefulModule.with_recording``."""
    global _recorder
    _recorder = recorder


class StatefulModule(nnx.Module):
    """A module called one env step at a time, with explicit per-env state.

    State is a pytree whose leaves have the batch as their leading axis. Stateless modules
    use the empty tuple. Subclasses implement ``__call__`` and, when stateful,
    ``initialize_state``.
    """

    def initialize_state(self, batch_size: int) -> Any:
        """The state at the start of an episode, for ``batch_size`` envs."""
        del batch_size
        return ()

    def reset_state(self, state: Any) -> Any:
        """The start-of-episode state with the same batch size as ``state``."""
        leaves = jax.tree.leaves(state)
        if not leaves:
            return state
        return self.initialize_state(leaves[0].shape[0])

    def __call__(self, state: Any, obs: Any, rollout_extras: Any = None) -> StatefulOutput:
        """Processes one step.

        Args:
            state: This module's state, ``[B, ...]`` leaves.
            obs: The input, ``[B, ...]`` leaves.
            rollout_extras: What this module recorded when it produced this step during a
                rollout, to replay it exactly; None while acting.

        Returns:
            The next state, the output, a scalar regularization loss, metrics and the extras
            to record for a replay.
        """
        raise NotImplementedError

    def update_statistics(self, inputs: Any, mask: jax.Array | None = None) -> None:
        """Merges a rollout's inputs into this module's running statistics; none here.

        Called after each PPO step, outside the rollout, never inside ``__call__``.
        Stats-bearing modules (``Normalizer``) override it and containers forward it to their
        children (see ``nnx_ppo.networks.containers``).

        Args:
            inputs: What this module was given over a rollout, ``[T, B, ...]`` leaves (for
                the network's root: the rollout's observations).
            mask: Optional ``[T, B]`` booleans; False entries are ignored.
        """
        del inputs, mask

    def with_recording(self) -> StatefulModule:
        """A copy of this module whose calls also report per-unit activations.

        See ``nnx_ppo.networks.recording``; this module is left unchanged.
        """
        if _recorder is None:  # only when ``recording`` was never imported
            raise RuntimeError("import nnx_ppo.networks.recording to record activations")
        recording: StatefulModule = _recorder(self)
        return recording


def zero_loss() -> jax.Array:
    """A scalar zero regularization loss."""
    return jnp.zeros((), jnp.float32)
