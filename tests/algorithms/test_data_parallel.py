"""Data-parallel training (``config.devices``): two host devices reproduce one device's
losses and parameters, for PPO (MLP and LSTM) and distillation, and a checkpoint written on
two devices resumes on one and on two. The runs happen in a subprocess
(``data_parallel_run``) started with two host devices, so the other tests keep one."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nnx_ppo.algorithms.config import PPOConfig, TrainConfig
from nnx_ppo.algorithms.training import schedule_of

ROOT = Path(__file__).resolve().parents[2]
# Sums of partial sums in another order: float32 rounding, compounded over a few updates.
RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def runs() -> dict:
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
        "JAX_PLATFORMS": "cpu",
        "NNX_PPO_JAX_CACHE": os.environ.get("NNX_PPO_JAX_CACHE", str(ROOT / ".cache" / "jax")),
        # Prepended, not replacing: the GPU check puts its wheels' directory on PYTHONPATH.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.algorithms.data_parallel_run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("kind", ["mlp", "lstm"])
def test_two_devices_reproduce_one_device(runs, kind):
    assert runs["device_count"] == 2
    run = runs[kind]
    assert run["devices_used"] == 2  # the envs really were split over both devices
    assert len(run["losses_2"]) == len(run["losses_1"]) == 6
    np.testing.assert_allclose(run["losses_2"], run["losses_1"], rtol=RTOL, atol=ATOL)
    assert run["param_difference"] < ATOL


def test_a_checkpoint_written_on_two_devices_resumes_on_one_and_on_two(runs):
    resume = runs["resume"]
    for devices in ("1", "2"):
        np.testing.assert_allclose(
            resume[devices]["losses"], resume["straight_tail"], rtol=RTOL, atol=ATOL
        )
        assert resume[devices]["param_difference"] < ATOL


def test_distillation_on_two_devices_reproduces_one_device(runs):
    run = runs["distillation"]
    assert run["devices_used"] == 2
    np.testing.assert_allclose(run["losses_2"], run["losses_1"], rtol=RTOL, atol=ATOL)
    assert run["param_difference"] < ATOL


BASE = TrainConfig(ppo=PPOConfig(n_envs=8, n_minibatches=2))


@pytest.mark.parametrize(
    ("devices", "ppo", "message"),
    [
        (2, {}, "JAX sees 1 device"),  # this process has one host device
        (0, {}, "config.devices"),
        (True, {}, "config.devices"),
    ],
)
def test_device_counts_are_checked_before_compiling(devices, ppo, message):
    with pytest.raises(ValueError, match=message):
        config = dataclasses.replace(BASE, devices=devices)
        schedule_of(dataclasses.replace(config, ppo=dataclasses.replace(config.ppo, **ppo)))
