"""Live ``nnx`` modules inside traced loops, and the rollout driver built on them.

The functional NNX pattern inside ``jax.lax.scan``: the modules are split once into a graph
definition (static) and an ``nnx.State`` that travels in the scan's carry; each step merges
live modules from it, calls them, and carries their ``nnx.state`` on, so that random-number
counters and other variables the calls change advance without leaking tracers
(``scan_with_modules``). ``unroll`` is the rollout driver of the training rollouts (Brax's
``generate_unroll``): ``length`` steps of a transition function, one key each.
``eval_copy`` is the deterministic policy that evaluation, videos and a distillation
teacher run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from flax import nnx

__all__ = ["eval_copy", "scan_with_modules", "unroll"]

Body = Callable[[Any, Any, Any], tuple[Any, Any]]
"""``body(modules, carry, x) -> (carry, y)``: one step on live modules."""


def eval_copy(module: Any) -> Any:
    """A copy of ``module`` in eval mode (deterministic sampler); ``module`` is unchanged."""
    graphdef, state = nnx.split(module)
    copy: Any = nnx.merge(graphdef, state)
    copy.eval()
    return copy


def scan_with_modules(
    body: Body, modules: Any, init: Any, xs: Any = None, length: int | None = None
) -> tuple[Any, Any, nnx.State]:
    """``jax.lax.scan`` of ``body(modules, carry, x) -> (carry, y)`` with live ``modules``
    (a module, or a tuple of them) rebuilt from their carried ``nnx.State`` at each step.

    Returns:
        ``(carry, ys, module_state)``: the final carry, the stacked ``y`` (leading
        ``[length]`` axis) and the modules' state after the last step; ``modules``
        themselves are left as they were (``nnx.update`` them to keep what the steps
        changed).
    """
    graphdef, module_state = nnx.split(modules)

    def step(both: tuple[Any, Any], x: Any) -> tuple[tuple[Any, Any], Any]:
        state, carry = both
        live = nnx.merge(graphdef, state)
        carry, y = body(live, carry, x)
        return (nnx.state(live), carry), y

    (module_state, carry), ys = jax.lax.scan(step, (module_state, init), xs, length=length)
    return carry, ys, module_state


def unroll(
    transition: Body, modules: Any, carry: Any, length: int, key: jax.Array
) -> tuple[Any, Any, nnx.State]:
    """The rollout driver: ``length`` steps of ``transition(modules, carry, key) -> (carry,
    transition)``, each with its own key split from ``key``.

    Returns:
        ``(carry, transitions, module_state)`` as ``scan_with_modules``; ``transitions``
        leaves are ``[T, B, ...]`` (time-major) for a ``[B]``-batched carry.
    """
    return scan_with_modules(transition, modules, carry, jax.random.split(key, length))
