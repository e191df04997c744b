"""Small process-level helpers."""

from __future__ import annotations

import pathlib
from typing import Any

import jax


def enable_compilation_cache(directory: str | pathlib.Path) -> None:
    """Turns on JAX's persistent compilation cache in ``directory`` (created if missing).

    Every compiled function is cached, however quick its compile, so that a second process
    with the same configuration starts without recompiling.
    """
    path = pathlib.Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def same_shapes(a: Any, b: Any) -> bool:
    """Whether two pytrees (of arrays or shape structs) have one structure and leaf shapes."""
    same_tree = jax.tree.structure(a) == jax.tree.structure(b)  # type: ignore[operator]
    return same_tree and all(
        x.shape == y.shape for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )
