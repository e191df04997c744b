"""Playground 0.2's env code on the JAX this project runs.

Two of Playground's envs (``LeapCubeReorient``, ``PandaRobotiqPushCube``) call
``jp.clip(x, a_max=...)``, keywords JAX removed in favour of ``min``/``max``; on such a JAX
they fail at their first step. Rather than patching ``jax.numpy`` for every caller, each
Playground module's own ``jp`` name is pointed at a view of ``jax.numpy`` whose ``clip``
also takes the old keywords. Feature-checked: on a JAX whose ``clip`` still takes them,
nothing changes.
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any

import jax.numpy as jnp

_PLAYGROUND_PACKAGE = "mujoco_playground."


def clip_takes_old_keywords() -> bool:
    """Whether this JAX's ``jnp.clip`` still accepts ``a_min``/``a_max``."""
    try:
        parameters = inspect.signature(jnp.clip).parameters
    except (TypeError, ValueError):  # No signature to read: assume nothing is missing.
        return True
    return "a_max" in parameters


def clip(arr: Any = None, /, min: Any = None, max: Any = None, **old: Any) -> Any:
    """``jnp.clip`` that also takes ``a_min``/``a_max`` (not both spellings of one bound)."""
    unknown = sorted(set(old) - {"a_min", "a_max"})
    if unknown:
        raise TypeError(f"clip() got unexpected keyword argument(s) {unknown}")
    if "a_min" in old:
        if min is not None:
            raise TypeError("clip() got both min and a_min")
        min = old["a_min"]
    if "a_max" in old:
        if max is not None:
            raise TypeError("clip() got both max and a_max")
        max = old["a_max"]
    return jnp.clip(arr, min=min, max=max)


class _NumpyWithOldClip(types.ModuleType):
    """``jax.numpy`` as seen by one Playground module: everything but ``clip`` is JAX's."""

    def __init__(self) -> None:
        super().__init__("jax.numpy")
        self.clip = clip

    def __getattr__(self, name: str) -> Any:
        return getattr(jnp, name)


def install() -> int:
    """Points every imported Playground module's ``jp`` at the compatible view; returns
    how many modules it changed (0 where this JAX needs nothing). Call it after
    ``mujoco_playground.registry`` is imported (which imports every env module)."""
    if clip_takes_old_keywords():
        return 0
    view = _NumpyWithOldClip()
    changed = 0
    for name, module in list(sys.modules.items()):
        if name.startswith(_PLAYGROUND_PACKAGE) and getattr(module, "jp", None) is jnp:
            module.jp = view  # type: ignore[attr-defined]
            changed += 1
    return changed
