"""``bench/gpu_check.sh`` runs to completion without a GPU or TPU and says so in its JSON."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.gpu_check import GPU_STEPS, first_reaching
from bench.learning_envs import playground_settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a GPU")
def test_without_a_gpu_the_check_probes_the_environment_and_skips_the_gpu_steps(tmp_path):
    out, log = tmp_path / "gpu.json", tmp_path / "gpu.log"
    env = {
        **os.environ,
        "NNX_PPO_PYTHON": sys.executable,
        "NNX_PPO_GPU_SITE": str(tmp_path / "site"),
    }
    env.pop("NNX_PPO_GPU_CHECK_STEPS", None)
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_check.sh"), str(out), str(log)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr + log.read_text()
    result = json.loads(out.read_text())
    assert result["gpu"] is False and "no NVIDIA GPU" in result["reason"]
    assert result["accelerator"] is None  # nor a TPU: JAX's default backend is the CPU
    probe = result["steps"]["environment"]
    assert probe["backend"] == "cpu" and probe["versions"]["jax"]
    assert set(probe["imports"].values()) == {"ok"}, probe["imports"]
    assert probe["apis"]["jax.export"] and probe["apis"]["jax.shard_map"]
    assert {name: result["steps"][name] for name in GPU_STEPS} == {
        name: {"skipped": "no GPU or TPU"} for name in GPU_STEPS
    }
    assert "[gpu-check] environment" in log.read_text()


def test_time_to_threshold_is_the_first_point_at_or_above_it():
    curve = [
        {"eval_reward": 500.0, "wall_seconds": 10.0},
        {"eval_reward": 900.0, "wall_seconds": 20.0},
        {"eval_reward": 950.0, "wall_seconds": 30.0},
    ]
    assert first_reaching(curve, 900.0) == 20.0
    assert first_reaching(curve[:1], 900.0) is None


def test_the_learning_step_uses_playgrounds_own_gpu_settings():
    settings = playground_settings("CartpoleSwingup", 10_000_000, 6, variant="gpu")
    # Playground: 2048 envs, 32 minibatches, batch 1024, unroll 30, 16 passes, value 5x256:
    # one update is 1024 * 32 * 30 = 983,040 env steps; 10M over 5 epochs rounds to 2 each.
    assert (settings["n_envs"], settings["n_minibatches"], settings["n_epochs"]) == (2048, 32, 16)
    assert settings["batch_size"] == 1024 and settings["rollout_length"] == 30
    assert settings["value_hidden"] == (256,) * 5
    assert settings["total_steps"] == 5 * 2 * 983_040
