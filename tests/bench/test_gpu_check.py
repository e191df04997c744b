"""``bench/gpu_check.sh`` runs to completion without a GPU and says so in its JSON."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.gpu_check import first_reaching

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a GPU")
def test_without_a_gpu_the_check_ends_with_a_no_gpu_result(tmp_path):
    out = tmp_path / "gpu.json"
    env = {**os.environ, "NNX_PPO_PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_check.sh"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["gpu"] is False
    assert "no NVIDIA GPU" in result["reason"]
    assert "cartpole" not in result and "tests" not in result


def test_time_to_threshold_is_the_first_point_at_or_above_it():
    curve = [
        {"eval_reward": 500.0, "wall_seconds": 10.0},
        {"eval_reward": 900.0, "wall_seconds": 20.0},
        {"eval_reward": 950.0, "wall_seconds": 30.0},
    ]
    assert first_reaching(curve, 900.0) == 20.0
    assert first_reaching(curve[:1], 900.0) is None
