"""Test-wide setup: CPU JAX with a persistent compilation cache shared across runs."""

from __future__ import annotations

import os
import pathlib

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MUJOCO_GL", "egl")

import jax

from nnx_ppo.utils import enable_compilation_cache

ROOT = pathlib.Path(__file__).resolve().parents[1]
enable_compilation_cache(os.environ.get("NNX_PPO_JAX_CACHE", str(ROOT / ".cache" / "jax")))
jax.config.update("jax_enable_x64", False)
