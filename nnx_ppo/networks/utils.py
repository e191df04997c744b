"""Small stateless utilities for wiring pytrees: ``Flattener``, ``Filter``, ``Scale``,
``Merge``, ``Map``. None keeps a carry of its own; ``Merge`` and ``Map`` hold children and
thread theirs (as dicts, like ``containers.Parallel``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from nnx_ppo.networks.base import StatefulModule, zero_loss
from nnx_ppo.networks.containers import _Named, pick
from nnx_ppo.networks.types import StatefulOutput

Extraction = str | int | tuple[str | int, ...] | Callable[[Any], Any]


def flatten_tree(x: Any) -> jax.Array:
    """Every leaf of ``x`` (``[B, ...]``) reshaped to ``[B, -1]`` and concatenated in
    ``jax.tree`` order (dict keys sorted)."""
    leaves = jax.tree.leaves(x)
    if not leaves:
        raise ValueError("Flattener got an input with no arrays")
    return jnp.concatenate([leaf.reshape(leaf.shape[0], -1) for leaf in leaves], axis=-1)


def _flatten_below(x: Any, levels: int) -> Any:
    if levels > 0 and isinstance(x, Mapping):
        return {k: _flatten_below(v, levels - 1) for k, v in x.items()}
    if levels > 0 and isinstance(x, list | tuple):
        return type(x)(_flatten_below(v, levels - 1) for v in x)
    return flatten_tree(x)


class Flattener(StatefulModule):
    """Flattens a pytree to one ``[B, F]`` array (leaves flattened and concatenated).

    With ``preserve_levels=N`` the top ``N`` levels of dict/list/tuple structure stay and
    only what is below them is flattened: ``{"a": {"x": [B, 2, 2], "y": [B, 1]}}`` gives
    ``[B, 5]`` with 0 levels and ``{"a": [B, 5]}`` with 1.
    """

    def __init__(self, preserve_levels: int = 0):
        if isinstance(preserve_levels, bool) or not isinstance(preserve_levels, int):
            raise ValueError(f"preserve_levels must be an int >= 0, got {preserve_levels!r}")
        if preserve_levels < 0:
            raise ValueError(f"preserve_levels must be an int >= 0, got {preserve_levels!r}")
        self.preserve_levels = preserve_levels

    def __call__(self, state: Any, x: Any, rollout_extras: Any = None) -> StatefulOutput:
        return StatefulOutput(state, _flatten_below(x, self.preserve_levels), zero_loss(), {}, None)


def extract(x: Any, extraction: Extraction, out_key: str) -> Any:
    """One ``Filter`` extraction from ``x``; a ``ValueError`` names a missing key."""
    if callable(extraction):
        return extraction(x)
    path = extraction if isinstance(extraction, tuple) else (extraction,)
    node = x
    for depth, key in enumerate(path):
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            have = sorted(node) if isinstance(node, Mapping) else type(node).__name__
            raise ValueError(
                f"Filter output {out_key!r}: path {path!r} has no {key!r} at depth {depth} "
                f"(there: {have})"
            ) from None
    return node


class Filter(StatefulModule):
    """Builds a dict from parts of its input; everything not named is dropped.

    ``Filter({"pos": "state", "first": ("state", 0), "norm": fn})``: an extraction is a key
    of the input, a tuple path of keys and indices, or a callable of the whole input.
    """

    def __init__(self, extractions: Mapping[str, Extraction]):
        if not isinstance(extractions, Mapping) or not extractions:
            raise ValueError("Filter takes a non-empty dict {out_key: extraction}")
        self.extractions = dict(extractions)

    def __call__(self, state: Any, x: Any, rollout_extras: Any = None) -> StatefulOutput:
        out = {key: extract(x, e, key) for key, e in self.extractions.items()}
        return StatefulOutput(state, out, zero_loss(), {}, None)


class Scale(StatefulModule):
    """Multiplies every leaf of its input by a constant ``factor``."""

    def __init__(self, factor: float):
        self.factor = float(factor)

    def __call__(self, state: Any, x: Any, rollout_extras: Any = None) -> StatefulOutput:
        return StatefulOutput(
            state, jax.tree.map(lambda v: v * self.factor, x), zero_loss(), {}, None
        )


class Merge(_Named):
    """Runs every child on the same input and merges their dict outputs into one dict.

    ``Merge({"a": m1, "b": m2})`` or ``Merge(a=m1, b=m2)``; the child names only name the
    carries. A key produced by two children is a ``ValueError`` naming both.
    """

    def __call__(self, state: Any, x: Any, rollout_extras: Any = None) -> StatefulOutput:
        out = self.run_children(state, x, rollout_extras)
        merged: dict[str, Any] = {}
        owner: dict[str, str] = {}
        for name, value in out.output.items():
            if not isinstance(value, Mapping):
                raise ValueError(
                    f"Merge child {name!r} must output a dict, got {type(value).__name__}"
                )
            for key, v in value.items():
                if key in merged:
                    raise ValueError(
                        f"Merge: key {key!r} is produced by both {owner[key]!r} and {name!r}"
                    )
                merged[key], owner[key] = v, name
        return out._replace(output=merged)


class Map(_Named):
    """Input is a dict; child ``name`` gets ``x[name]``; keys without a child are dropped.

    ``Map({"arm": sampler_a, "leg": sampler_b})`` or ``Map(arm=..., leg=...)``; the output is
    ``{name: child output}``.
    """

    def child_input(self, name: str, x: Any) -> Any:
        return pick(x, name, "Map")
