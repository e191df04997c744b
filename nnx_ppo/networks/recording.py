"""``with_recording``: a copy of a network whose calls also report per-unit activations.

Design: the existing layer classes are not touched. ``with_recording`` clones the network
(``nnx.clone``: new ``Variable`` objects, shared array buffers) and, in the clone only,
replaces every ``MLP``, ``LSTM`` and stand-alone ``Dense`` by a thin wrapper module that
holds the original layer as ``inner`` and, on each call, adds the layer's activations to
``StatefulOutput.metrics`` under ``"activations/<module path>"``. The library's containers
(``PPONetwork``, ``Sequential``) merge their children's metrics, so the activations reach
the top-level output, where ``activations_from_metrics`` picks them out. Keys are the
module's path in the original network:

* ``layers.MLP`` at ``actor`` (the old ``PPONetwork`` layout, ``nnx_ppo.networks.legacy``):
  ``actor/layers/{i}`` for each layer, ``[B, units]``: the activation output of a hidden
  layer, the affine output of the last layer.
* ``layers.LSTM`` at ``actor/modules/0`` (the same layout): that key, its hidden state
  ``h``, ``[B, hidden_size]``.
* ``Dense`` outside an ``MLP``: its path, its output ``[B, units]``.
* The composable toolkit's ``feedforward.Dense``, ``recurrent.LSTM`` and variational
  bottlenecks (e.g. ``make_mlp_actor_critic``'s first policy layer, or
  ``make_lstm_actor_critic``'s policy LSTM, at ``layers/2/action/layers/0``, or
  ``layers/1/...`` without a normalizer): their
  path, their output (post-activation for a ``Dense``, ``h`` for an ``LSTM``, the sampled
  latent for a bottleneck).
* ``graph.PopulationGraph``: one entry per population, keyed by the population's name (not
  a path), its post-activation value ``[B, size]``; the graph's edge transforms are not
  recorded on their own.

(A recordable module at the root uses ``root`` for an empty path.) A module reachable by
several paths in the graph is recorded at the first one only. A subclass of ``MLP`` is not
recorded, since recording re-runs the plain ``MLP`` forward pass layer by layer.

Recording is meant for analysis: the activation metrics are ``[B, units]`` arrays, not the
scalars or ``[B]`` arrays that training metrics are.
"""

from __future__ import annotations

from typing import Any

import jax
from flax import nnx

from nnx_ppo.networks import feedforward, recurrent, variational
from nnx_ppo.networks.base import StatefulModule, install_recorder, zero_loss
from nnx_ppo.networks.layers import LSTM, MLP, Dense, activation_fn
from nnx_ppo.networks.types import StatefulOutput

ACTIVATIONS_PREFIX = "activations/"
_ROOT_KEY = "root"

PathKey = str | int


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


class _Recorder(StatefulModule):
    """Base of the recording wrappers: delegates state handling to ``inner``.

    Args:
        inner: The wrapped module.
        key: The module's path in the original network, ``/``-joined.
    """

    def __init__(self, inner: StatefulModule, key: str):
        self.inner = inner
        self.key = key

    def initialize_state(self, batch_size: int) -> Any:
        return self.inner.initialize_state(batch_size)

    def reset_state(self, state: Any) -> Any:
        return self.inner.reset_state(state)


class RecordingOutput(_Recorder):
    """Records the output of a module whose output is its activation (``LSTM``, ``Dense``)."""

    def __call__(self, state: Any, obs: Any, rollout_extras: Any = None) -> StatefulOutput:
        out = self.inner(state, obs, rollout_extras)
        name = ACTIVATIONS_PREFIX + (self.key or _ROOT_KEY)
        return out._replace(metrics={**out.metrics, name: out.output})


class RecordingMLP(_Recorder):
    """Runs an ``MLP`` layer by layer and records each layer's output."""

    def __call__(self, state: Any, obs: jax.Array, rollout_extras: Any = None) -> StatefulOutput:
        mlp: Any = self.inner
        act = activation_fn(mlp.activation)
        n_layers = len(mlp.layers)
        recorded = {}
        x = obs
        for i, layer in enumerate(mlp.layers):
            x = layer.linear(x)
            if i < n_layers - 1:
                x = act(x)
            recorded[ACTIVATIONS_PREFIX + _join(self.key, "layers", str(i))] = x
        return StatefulOutput(state, x, zero_loss(), recorded, None)


def _is_recordable(node: Any) -> bool:
    toolkit = (feedforward.Dense, recurrent.LSTM, variational.VariationalBottleneck)
    return type(node) is MLP or isinstance(node, (LSTM, Dense, *toolkit))


def _records_itself(node: Any) -> bool:
    """A ``graph.PopulationGraph``: it records its populations when its flag is set."""
    return hasattr(node, "record_populations")


def _recorder_for(node: StatefulModule, key: str) -> _Recorder:
    """The recording wrapper for a recordable ``node``."""
    if type(node) is MLP:
        return RecordingMLP(node, key)
    return RecordingOutput(node, key)


def _child(parent: Any, key: PathKey) -> Any:
    if isinstance(key, int) or hasattr(type(parent), "__getitem__"):
        return parent[key]
    return getattr(parent, key)


def _set_child(parent: Any, key: PathKey, value: Any) -> None:
    if isinstance(key, int) or hasattr(type(parent), "__setitem__"):
        parent[key] = value
    else:
        setattr(parent, key, value)


def _outermost(paths: list[tuple[PathKey, ...]]) -> list[tuple[PathKey, ...]]:
    """The paths that have no proper prefix in ``paths``."""
    chosen = set(paths)
    return [p for p in paths if not any(p[:i] in chosen for i in range(len(p)))]


def with_recording(networks: nnx.Module) -> nnx.Module:
    """A recordable copy of ``networks``; ``networks`` itself is left as it was.

    Calls of the copy return the same outputs as the original and, in addition, the
    activations described in this module's docstring in ``StatefulOutput.metrics``. Applying
    ``with_recording`` to a recordable network records each layer once, not twice.

    Args:
        networks: Any graph of ``StatefulModule``s (e.g. a ``PPONetwork``).

    Returns:
        The recordable copy (the root itself may be a wrapper when ``networks`` is an
        ``MLP``, ``LSTM`` or ``Dense``).
    """
    copy = nnx.clone(networks)
    candidates = [
        path
        for path, node in nnx.iter_graph(copy)
        if isinstance(node, _Recorder) or _is_recordable(node) or _records_itself(node)
    ]
    for path in _outermost(candidates):  # type: ignore[arg-type]  # keys are str | int
        parent = copy
        for key in path[:-1]:
            parent = _child(parent, key)
        node = copy if not path else _child(parent, path[-1])
        if isinstance(node, _Recorder):
            continue
        if _records_itself(node):
            node.record_populations = True  # type: ignore[union-attr]  # checked above
            continue
        wrapper = _recorder_for(node, _join(*(str(k) for k in path)))  # type: ignore[arg-type]
        if not path:
            return wrapper
        _set_child(parent, path[-1], wrapper)
    return copy


def activations_from_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """The recorded activations in ``metrics``, keyed by module path (prefix removed)."""
    n = len(ACTIVATIONS_PREFIX)
    return {k[n:]: v for k, v in metrics.items() if k.startswith(ACTIVATIONS_PREFIX)}


install_recorder(with_recording)  # ``StatefulModule.with_recording`` calls it
