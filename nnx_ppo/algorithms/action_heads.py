"""Several action heads: sums and per-head views over dict actions.

A network with one action head acts with a plain ``[B, A]`` array; one with several
(``PPOAdapter(action=Map({head: sampler}))``) acts with a dict ``{head: [B, A_head]}``, and
so are its raw actions and distribution parameters. The heads sample independently, so the
joint log-likelihood, entropy and KL divergence of the action are the sums over heads of
each head's. The helpers here take either form; on a plain array they compute exactly what
the single-head code did (no sum, no reshaping), so one-head numerics do not change.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

HEAD_SEPARATOR = "/"
"""Joins a metric's name and its head's: ``entropy/left``, ``actor/entropy/left``."""


def is_multi_head(actions: Any) -> bool:
    """Whether ``actions`` is a dict of action heads (rather than one array)."""
    return isinstance(actions, Mapping)


def heads_of(tree: Any) -> dict[str, Any]:
    """``{head: leaf}``: a dict as it is, a plain array as the single head ``""``."""
    return dict(tree) if is_multi_head(tree) else {"": tree}


def sum_over_heads(fn: Callable[..., jax.Array], *trees: Any) -> jax.Array:
    """``fn`` of each head's arrays, summed over the heads.

    Args:
        fn: Takes one array per tree (a head's ``[..., A_head]``) and returns ``[...]``.
        *trees: Plain arrays, or dicts with the same heads.

    Returns:
        ``fn(*trees)`` for plain arrays; ``sum_h fn(*(t[h] for t in trees))`` for dicts.

    Raises:
        ValueError: If the trees do not have the same heads.
    """
    if not is_multi_head(trees[0]):
        return fn(*trees)
    return functools.reduce(operator.add, map_heads(fn, *trees).values())


def map_heads(fn: Callable[..., Any], *trees: Any) -> dict[str, Any]:
    """``{head: fn(*(t[head] for t in trees))}``, heads in the first tree's order.

    Raises:
        ValueError: If the trees do not have the same heads, or have none.
    """
    named = [heads_of(t) for t in trees]
    names = list(named[0])
    if not names:
        raise ValueError("an action with no heads (an empty dict)")
    for other in named[1:]:
        if set(other) != set(names):
            raise ValueError(f"action heads differ: {sorted(names)} and {sorted(other)}")
    return {h: fn(*(n[h] for n in named)) for h in names}


def mean_over_heads(fn: Callable[..., jax.Array], *trees: Any) -> jax.Array:
    """The mean of ``fn``'s elementwise values over every action dimension of every head
    (each head's dimensions weigh alike): ``jnp.mean(fn(*trees))`` for plain arrays."""
    if not is_multi_head(trees[0]):
        return jnp.mean(fn(*trees))
    values = map_heads(fn, *trees)
    flat = jnp.concatenate([jnp.ravel(v) for v in values.values()])
    return jnp.mean(flat)


def action_shape(actions: Any) -> int | dict[str, int]:
    """The size of the last axis of ``actions``: an int, or ``{head: size}``."""
    if is_multi_head(actions):
        return {h: int(jnp.shape(a)[-1]) for h, a in actions.items()}
    return int(jnp.shape(actions)[-1])


def head_metrics(metrics: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``{head: value}`` of the per-head entries ``{name}/{head}`` of ``metrics``."""
    prefix = name + HEAD_SEPARATOR
    return {k[len(prefix) :]: v for k, v in metrics.items() if k.startswith(prefix)}


def check_action_structure(expected: Any, produced: int | dict[str, int]) -> None:
    """Raises ``ValueError`` unless the network's action shape ``produced`` (see
    ``action_shape``) is what an env of ``action_size`` ``expected`` takes (an int, or
    ``{head: size}``); the message names the heads and sizes that differ."""
    if isinstance(expected, Mapping) != isinstance(produced, Mapping):
        raise ValueError(
            f"the env expects actions {_describe(expected)}, but the network produces "
            f"{_describe(produced)} (several action heads need PPOAdapter(action=Map("
            "{head: sampler})) with one head per env action key)"
        )
    if not isinstance(expected, Mapping) or not isinstance(produced, Mapping):
        if produced != expected:
            raise ValueError(f"the network's actions have size {produced}, the env's {expected}")
        return
    if set(expected) != set(produced):
        raise ValueError(
            f"the env's action heads are {sorted(expected)}, the network's {sorted(produced)}"
        )
    wrong = {h: (produced[h], expected[h]) for h in expected if produced[h] != expected[h]}
    if wrong:
        detail = ", ".join(f"{h!r}: {p} (the env's {e})" for h, (p, e) in sorted(wrong.items()))
        raise ValueError(f"the network's action heads have the wrong sizes: {detail}")


def _describe(size: Any) -> str:
    if isinstance(size, Mapping):
        return "as a dict of heads " + str({h: int(s) for h, s in size.items()})
    return f"as one [{size}] array"
