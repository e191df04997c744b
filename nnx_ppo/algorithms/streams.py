"""Reward streams: a reward may be a pytree of streams (``{"task": r1, "energy": r2}``),
with one value head per stream. Helpers shared by the rollout, the loss and evaluation."""

from __future__ import annotations

from typing import Any

import jax


def sum_leaves(terms: list[jax.Array]) -> jax.Array:
    """The sum of a non-empty list of arrays."""
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def stream_names(tree: Any) -> list[tuple[str, jax.Array]]:
    """``(name, leaf)`` of every reward stream of a pytree (``"a/b"`` for nested keys; the
    empty name for a single array)."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [("/".join(_key_name(k) for k in path), leaf) for path, leaf in flat]


def _key_name(key: Any) -> str:
    for attribute in ("key", "name", "idx"):
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)


def check_streams(rewards: Any, values: Any) -> None:
    """Raises ValueError unless the reward streams and the value heads have one structure
    (one array each, or a dict of streams and one head per stream)."""
    reward_tree, value_tree = jax.tree.structure(rewards), jax.tree.structure(values)
    if reward_tree != value_tree:  # type: ignore[operator]
        reward_names = [n for n, _ in stream_names(rewards)]
        value_names = [n for n, _ in stream_names(values)]
        describe = lambda names: names if names != [""] else "one array"  # noqa: E731
        raise ValueError(
            f"the env's rewards ({describe(reward_names)}) and the network's value heads "
            f"({describe(value_names)}) differ: build the network with "
            f"reward_streams={tuple(reward_names) if reward_names != [''] else None!r} "
            "(one value head per reward stream)"
        )
