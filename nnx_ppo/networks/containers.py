"""Containers of ``StatefulModule``s: ``Sequential``, ``Parallel``, ``Concat``, ``Splitter``.

A container's carry is made of its children's carries (a list for ``Sequential``, a dict for
the named containers), and so are its ``rollout_extras``; its regularization loss is the sum
of its children's and its metrics their union. ``reset_state`` and ``update_statistics`` are
forwarded to the children.

``update_statistics(inputs)`` gets what the container was given over a rollout (``[T, B,
...]`` leaves; for the network's root, the observations the trainer passes). A child that
reads another child's output (a later layer of a ``Sequential``) is given that output,
recomputed from the inputs, which is possible only when the layers before it keep no carry;
otherwise the update raises a ``ValueError`` naming the layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.networks.base import StatefulModule, zero_loss
from nnx_ppo.networks.normalizer import NormalizerStatistics
from nnx_ppo.networks.types import StatefulOutput


def named_children(
    container: str, children: Mapping[str, StatefulModule] | None, kwargs: dict[str, Any]
) -> dict[str, StatefulModule]:
    """The children of a named container given as a dict or as keyword arguments.

    Raises:
        ValueError: if both forms or neither are given, or a child is not a module.
    """
    if children is not None and kwargs:
        raise ValueError(f"{container} takes a dict or keyword arguments, not both")
    named = dict(children) if children is not None else dict(kwargs)
    if not named:
        raise ValueError(f"{container} needs at least one child")
    for name, child in named.items():
        if not isinstance(child, StatefulModule):
            raise ValueError(
                f"{container} child {name!r} must be a StatefulModule, got {type(child).__name__}"
            )
    return named


def has_statistics(module: nnx.Module) -> bool:
    """Whether ``module`` (or a module inside it) keeps running statistics."""
    return bool(jax.tree.leaves(nnx.state(module, NormalizerStatistics)))


def apply_stateless(module: StatefulModule, inputs: Any, where: str) -> Any:
    """``module``'s output for each step of ``[T, B, ...]`` inputs (a module without carry).

    Raises:
        ValueError: naming ``where`` if ``module`` keeps a carry.
    """
    batch = jax.tree.leaves(inputs)[0].shape[1]
    if jax.tree.leaves(jax.eval_shape(lambda: module.initialize_state(batch))):
        raise ValueError(
            f"{where} ({type(module).__name__}) keeps a carry, so the statistics of the "
            "normalizer after it cannot be updated from the observations; put stats-bearing "
            "modules before any recurrent one"
        )
    return jax.vmap(lambda x: module((), x).output)(inputs)


class Sequential(StatefulModule):
    """Feeds each layer's output to the next; the carry is the list of the layers' carries.

    Args:
        layers: The ``StatefulModule``s, first to last.
    """

    def __init__(self, layers: list[StatefulModule] | tuple[StatefulModule, ...]):
        if isinstance(layers, StatefulModule) or not layers:
            raise ValueError("Sequential takes a non-empty list of layers: Sequential([a, b])")
        self.layers = nnx.List(list(layers))

    def initialize_state(self, batch_size: int) -> list[Any]:
        return [layer.initialize_state(batch_size) for layer in self.layers]

    def reset_state(self, prev_state: list[Any]) -> list[Any]:
        return [layer.reset_state(s) for layer, s in zip(self.layers, prev_state, strict=True)]

    def __call__(self, state: list[Any], x: Any, rollout_extras: Any = None) -> StatefulOutput:
        return self._run(state, x, rollout_extras, acting=False)

    def act(self, state: list[Any], x: Any) -> StatefulOutput:
        """A call for acting in a rollout: as ``__call__``, but the last layer's ``act``
        runs where it has one (``PPOAdapter``'s skips a carry-less value port)."""
        return self._run(state, x, None, acting=True)

    def _run(self, state: list[Any], x: Any, rollout_extras: Any, acting: bool) -> StatefulOutput:
        extras = [None] * len(self.layers) if rollout_extras is None else rollout_extras
        next_state: list[Any] = []
        new_extras: list[Any] = []
        metrics: dict[str, Any] = {}
        loss = zero_loss()
        last = len(self.layers) - 1
        for i, (layer, s, e) in enumerate(zip(self.layers, state, extras, strict=True)):
            act = getattr(layer, "act", None) if acting and i == last else None
            out = act(s, x) if act is not None else layer(s, x, e)
            next_state.append(out.next_state)
            new_extras.append(out.rollout_extras)
            metrics.update(out.metrics)
            loss = loss + out.regularization_loss
            x = out.output
        return StatefulOutput(next_state, x, loss, metrics, new_extras)

    def update_statistics(self, inputs: Any, mask: jax.Array | None = None) -> None:
        layers = list(self.layers)
        with_stats = [has_statistics(layer) for layer in layers]
        x = inputs
        for i, layer in enumerate(layers):
            if not any(with_stats[i:]):
                return
            if with_stats[i]:
                layer.update_statistics(x, mask)
            if any(with_stats[i + 1 :]):
                x = apply_stateless(layer, x, f"Sequential layer {i}")


class _Named(StatefulModule):
    """Base of the containers whose children are named; carry and extras are dicts."""

    def __init__(
        self, children: Mapping[str, StatefulModule] | None = None, **kwargs: StatefulModule
    ):
        self.children = nnx.Dict(named_children(type(self).__name__, children, kwargs))

    def initialize_state(self, batch_size: int) -> dict[str, Any]:
        return {name: child.initialize_state(batch_size) for name, child in self.children.items()}

    def reset_state(self, prev_state: dict[str, Any]) -> dict[str, Any]:
        return {name: child.reset_state(prev_state[name]) for name, child in self.children.items()}

    def child_input(self, name: str, x: Any) -> Any:
        """What child ``name`` reads of the container's input: all of it here."""
        del name
        return x

    def run_children(self, state: dict[str, Any], x: Any, rollout_extras: Any) -> StatefulOutput:
        """Calls every child on its input; output ``{name: child output}``."""
        outputs, next_state, extras, metrics = {}, {}, {}, {}
        loss = zero_loss()
        for name, child in self.children.items():
            e = None if rollout_extras is None else rollout_extras[name]
            out = child(state[name], self.child_input(name, x), e)
            outputs[name] = out.output
            next_state[name] = out.next_state
            extras[name] = out.rollout_extras
            metrics.update(out.metrics)
            loss = loss + out.regularization_loss
        return StatefulOutput(next_state, outputs, loss, metrics, extras)

    def __call__(self, state: Any, x: Any, rollout_extras: Any = None) -> StatefulOutput:
        return self.run_children(state, x, rollout_extras)

    def update_statistics(self, inputs: Any, mask: jax.Array | None = None) -> None:
        for name, child in self.children.items():
            if has_statistics(child):
                child.update_statistics(self.child_input(name, inputs), mask)


class Parallel(_Named):
    """Every child gets the same input; the output is ``{name: child output}``.

    ``Parallel({"a": m1, "b": m2})`` or ``Parallel(a=m1, b=m2)``.
    """


def pick(x: Any, name: str, container: str) -> Any:
    """``x[name]``, or a ``ValueError`` naming the key and the keys there are."""
    if not isinstance(x, Mapping) or name not in x:
        keys = sorted(x) if isinstance(x, Mapping) else f"none (a {type(x).__name__})"
        raise ValueError(f"{container} child {name!r} reads input key {name!r}; input keys: {keys}")
    return x[name]


class Concat(_Named):
    """Input is a dict; child ``name`` gets ``x[name]``; the children's outputs are
    concatenated on the last axis (in the children's order).

    ``Concat({"a": m1, "b": m2})`` or ``Concat(a=m1, b=m2)``.
    """

    def child_input(self, name: str, x: Any) -> Any:
        return pick(x, name, "Concat")

    def __call__(self, state: Any, x: Any, rollout_extras: Any = None) -> StatefulOutput:
        out = self.run_children(state, x, rollout_extras)
        joined = jnp.concatenate([out.output[name] for name in self.children], axis=-1)
        return out._replace(output=joined)


class Splitter(StatefulModule):
    """Splits the last axis of an array into ``{name: slice}`` of the given sizes, in order.

    ``Splitter(mean=3, log_std=3)`` on ``[B, 6]`` gives ``{"mean": [B, 3], "log_std": [B,
    3]}``. The sizes must add up to the input's last axis.
    """

    def __init__(self, **sizes: int):
        if not sizes:
            raise ValueError("Splitter needs at least one size: Splitter(a=2, b=3)")
        for name, size in sizes.items():
            if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
                raise ValueError(f"Splitter size {name!r} must be a positive int, got {size!r}")
        self.sizes = dict(sizes)

    def __call__(self, state: Any, x: jax.Array, rollout_extras: Any = None) -> StatefulOutput:
        total = sum(self.sizes.values())
        if x.shape[-1] != total:
            raise ValueError(
                f"Splitter sizes {self.sizes} add up to {total}, but the input's last axis "
                f"is {x.shape[-1]}"
            )
        parts, start = {}, 0
        for name, size in self.sizes.items():
            parts[name] = x[..., start : start + size]
            start += size
        return StatefulOutput(state, parts, zero_loss(), {}, None)
