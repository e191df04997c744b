"""Process-wide JAX set-up shared by every benchmark process.

Call :func:`enable_compilation_cache` before the first compilation in the process, and
:func:`install_jax_shims` before calling Brax's trainers. With the persistent cache on, a rerun
of the same program loads its XLA executables from disk instead of compiling them, so a compile
time measured on a warm cache is mostly tracing and cache loading, not XLA compilation. Point
``$NNX_PPO_BENCH_JAX_CACHE`` at an empty directory to measure a cold compile.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

DEFAULT_CACHE_DIR = Path(__file__).resolve().parent / ".cache" / "jax"
"""Persistent compilation cache shared by all bench processes (``bench/.cache`` is ignored)."""

BRAX_PMAP_AXIS_NAME = "i"
"""The axis name of Brax's ``jax.pmap`` calls (``_PMAP_AXIS_NAME`` in ``ppo/train.py``)."""

CACHE_DIR_ENV = "NNX_PPO_BENCH_JAX_CACHE"
"""Environment variable that overrides :data:`DEFAULT_CACHE_DIR`."""


def enable_compilation_cache(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Turns on JAX's persistent compilation cache for this process and caches every program.

    Args:
        cache_dir: Where to keep compiled executables; defaults to ``$NNX_PPO_BENCH_JAX_CACHE``
            or else :data:`DEFAULT_CACHE_DIR`.

    Returns:
        The cache directory in use (created if missing).
    """
    if cache_dir is None:
        cache_dir = os.environ.get(CACHE_DIR_ENV) or DEFAULT_CACHE_DIR
    path = Path(cache_dir).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    # Cache every executable, however quick to compile: the benchmark wants reruns comparable.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path


def install_jax_shims() -> list[str]:
    """Restores JAX APIs that Brax 0.14.2 still calls but JAX 0.10 removed.

    Brax's PPO (``ppo/train.py`` and ``training/pmap.py``) calls only
    ``jax.device_put_replicated`` among removed APIs. The shim stacks each leaf ``n_devices``
    times along a new leading axis and shards that axis over ``devices``, which is what the old
    function returned and what ``jax.pmap`` and Brax's ``_unpmap`` (``addressable_shards[0]``)
    expect. The mesh axis is named :data:`BRAX_PMAP_AXIS_NAME`, so the replicated training
    state carries exactly the sharding that JAX 0.10's ``pmap`` gives its outputs. With any
    other name, each training epoch and each evaluation saw a new mix of input shardings
    (leaves still from the shim next to leaves from a ``pmap``) and was compiled again until
    every leaf had been through a ``pmap`` (three epochs and four evals on CartpoleBalance),
    which put compile time into Brax's "steady" epochs.
    Idempotent.

    Returns:
        Names of the attributes installed.
    """
    installed = []
    if not hasattr(jax, "device_put_replicated"):

        def device_put_replicated(x: Any, devices: Sequence[jax.Device]) -> Any:
            devices = list(devices)
            mesh = jax.sharding.Mesh(np.asarray(devices), (BRAX_PMAP_AXIS_NAME,))
            spec = jax.sharding.PartitionSpec(BRAX_PMAP_AXIS_NAME)
            sharding = jax.sharding.NamedSharding(mesh, spec)

            def put(leaf: Any) -> jax.Array:
                leaf = jnp.asarray(leaf)
                stacked = jnp.broadcast_to(leaf[None], (len(devices), *leaf.shape))
                return jax.device_put(stacked, sharding)

            return jax.tree.map(put, x)

        jax.device_put_replicated = device_put_replicated
        installed.append("device_put_replicated")
    return installed
