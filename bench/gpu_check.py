"""The GPU check that ``bench/gpu_check.sh`` runs: one JSON with everything measured.

::

    bash bench/gpu_check.sh [OUT.json]        # ~8 minutes on one GPU; seconds without one

Steps, each with a time limit and each recorded even when it fails:

1. ``gpu``: is there an NVIDIA GPU (``nvidia-smi -L``) and does JAX see it? Without one the
   JSON says ``"gpu": false`` with the reason and nothing else runs.
2. ``tests``: the test subset that exercises the jitted core (training loop, losses, data
   parallelism) with ``JAX_PLATFORMS=cuda``.
3. ``cartpole``: ours and Brax (fresh processes) on CartpoleBalance with Playground's GPU PPO
   settings (``bench.settings.PLAYGROUND_GPU``): steady env steps/s and the wall time to
   the first eval reward >= 900.
4. ``walker``: our env steps/s on WalkerWalk (SPEED settings, 2048 envs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEST_SUBSET = (
    "tests/algorithms/test_train_loop.py",
    "tests/algorithms/test_ppo_loss.py",
    "tests/algorithms/test_reward_streams.py",
    "tests/algorithms/test_data_parallel.py",
)


def gpu_status() -> dict[str, Any]:
    """``{"gpu": bool, "reason" or "devices"}`` from ``nvidia-smi -L``."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {"gpu": False, "reason": "no NVIDIA GPU: nvidia-smi is not installed"}
    done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    lines = [line for line in done.stdout.splitlines() if line.startswith("GPU ")]
    if done.returncode != 0 or not lines:
        why = (done.stderr or done.stdout).strip().splitlines()[:1]
        return {"gpu": False, "reason": f"no NVIDIA GPU: nvidia-smi -L found none {why}"}
    return {"gpu": True, "devices": lines}


def first_reaching(curve: list[Mapping[str, float]], threshold: float) -> float | None:
    """Wall seconds of the first curve point at or above ``threshold``, or None."""
    for point in curve:
        if point["eval_reward"] >= threshold:
            return float(point["wall_seconds"])
    return None


def _timed(step: str, fn: Any, out: dict[str, Any]) -> None:
    start = time.monotonic()
    try:
        out[step] = fn()
    except Exception as error:  # recorded, and the other steps still run
        out[step] = {"error": f"{type(error).__name__}: {error}"}
    out[step]["seconds"] = round(time.monotonic() - start, 1)


def run_tests(timeout_s: float) -> dict[str, Any]:
    env = {**os.environ, "JAX_PLATFORMS": "cuda"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TEST_SUBSET],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    return {"returncode": done.returncode, "summary": done.stdout.strip().splitlines()[-1:]}


def cartpole(total_steps: int, timeout_s: float) -> dict[str, Any]:
    from bench.brax_runner import run_brax_ppo_subprocess
    from bench.nnx_runner import run_nnx_ppo_subprocess
    from bench.settings import PLAYGROUND_GPU

    settings = {**PLAYGROUND_GPU, "total_steps": total_steps}
    out: dict[str, Any] = {"settings": dict(settings)}
    for name, runner in (("nnx_ppo", run_nnx_ppo_subprocess), ("brax", run_brax_ppo_subprocess)):
        result = runner(settings, timeout_s=timeout_s)
        out[name] = {
            "env_steps_per_second": result["env_steps_per_second"],
            "compile_seconds": result["compile_seconds"],
            "seconds_to_900": first_reaching(result["curve"], 900.0),
            "final_eval_reward": result["final_eval_reward"],
        }
    out["ratio"] = out["nnx_ppo"]["env_steps_per_second"] / out["brax"]["env_steps_per_second"]
    return out


def walker(total_steps: int, timeout_s: float) -> dict[str, Any]:
    from bench.nnx_runner import run_nnx_ppo_subprocess
    from bench.settings import SPEED

    settings = {**SPEED, "env": "WalkerWalk", "n_envs": 2048, "batch_size": 512}
    result = run_nnx_ppo_subprocess(
        {**settings, "total_steps": total_steps, "num_evals": 3}, timeout_s=timeout_s
    )
    return {"env_steps_per_second": result["env_steps_per_second"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--cartpole-steps", type=int, default=20_000_000)
    parser.add_argument("--walker-steps", type=int, default=4_096_000)
    args = parser.parse_args(argv)
    out: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out.update(gpu_status())
    if out["gpu"]:
        import jax

        out["jax_backend"] = jax.default_backend()
        out["jax_devices"] = [str(d) for d in jax.devices()]
        _timed("tests", lambda: run_tests(150), out)
        _timed("cartpole", lambda: cartpole(args.cartpole_steps, 150), out)
        _timed("walker", lambda: walker(args.walker_steps, 90), out)
    args.out.write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
