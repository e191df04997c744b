"""Shared by the client's tests: the nnx-ppo CLI in a subprocess, and loading a checkpoint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.service_harness import ROOT, TOKEN, Service


def nnx_ppo(
    service: Service, *args: str, timeout: float = 240, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``nnx-ppo ARGS`` against ``service`` (URL and token from the environment)."""
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        cwd=ROOT,
        text=True,
        capture_output=True,
        timeout=timeout,
        env={
            **os.environ,
            "NNX_PPO_URL": service.url,
            "NNX_PPO_API_TOKEN": TOKEN,
            "COLUMNS": "160",
            **(env or {}),
        },
    )


def load_checkpoint_step(path: Path, spec: dict[str, Any]) -> int:
    """``load_checkpoint`` reads ``path`` into networks built from the run's spec; the
    checkpoint's step."""
    from nnx_ppo import envs
    from nnx_ppo.algorithms.checkpointing import load_checkpoint
    from nnx_ppo.algorithms.step import new_training_state
    from nnx_ppo.presets import make_networks

    env = envs.load(spec["env"]["name"])
    networks = make_networks(spec["network"], env.observation_size, env.action_size, 0)
    state = new_training_state(env, networks, 16, 0, 1e-4)
    return int(load_checkpoint(str(path), state.networks, state.optimizer)["step"])
