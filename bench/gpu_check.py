"""The GPU check that ``bench/gpu_check.sh`` runs: one JSON, rewritten after every step.

::

    bash bench/gpu_check.sh OUT.json [LOG]    # <= 9 minutes on one GPU

For a bare GPU machine with no network: ``gpu_check.sh`` installs the wheels of ``.whl/``
(``bench/gpu_bundle.sh``) with ``pip --no-index --no-deps --target`` and puts that directory
on ``PYTHONPATH``, next to the machine's own JAX. Then the steps, in this order, each with its
own time limit (cut to what is left of ``--budget-s``), each recorded when it ends, failed or
not, and none stopping the others:

1. ``environment``: package versions, JAX's backend and devices, which JAX APIs exist (the
   JAX 0.11 list of ``bench/RESULTS.md``), that every module imports, and which ffmpeg.
2. ``tests``: the test subset of the jitted core, ``JAX_PLATFORMS=cuda`` (``tpu`` on a TPU,
   with float32 matrix products), not stopping at the first failure: a JAX 0.11
   incompatibility shows in the first minutes.
3. ``cartpole``: ours and Brax (fresh processes) on CartpoleBalance with Playground's GPU
   settings (``bench.settings.PLAYGROUND_GPU``): steady env steps/s, start-up (compile)
   seconds, wall seconds to the first eval reward >= 900.
4. ``service``: ``nnx-ppo serve`` on the GPU, a run submitted over HTTP, its stream
   followed, its checkpoint and its EGL-rendered video downloaded.
5. ``learning``: ours and Brax at Playground's own settings (``preset(env, "gpu")``) on the
   five envs of the learning table (or ``--learning-envs``), one seed each, as many as the
   time left allows.

A TPU (JAX's default backend, where there is no NVIDIA GPU) counts as the accelerator too;
its machine opens no socket, so the ``service`` step cannot run there. Without either, steps
2-5 are recorded as skipped (``NNX_PPO_GPU_CHECK_STEPS=tests,...`` runs the named ones anyway,
on the CPU: to try the bundle here).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEST_SUBSET = (
    "tests/algorithms/test_train_loop.py",
    "tests/algorithms/test_ppo_loss.py",
    "tests/algorithms/test_reward_streams.py",
    "tests/algorithms/test_data_parallel.py",
)
TPU_START_WARNINGS = (
    "cloud_tpu_init failed:UserWarning",
    "Transparent hugepages are not enabled:UserWarning",
)
"""What JAX warns when it opens a TPU in a VM without transparent hugepages; the suite turns
warnings into errors, and these would stop it at its conftest."""
GPU_STEPS = ("tests", "cartpole", "service", "learning")
"""Steps that need a GPU (skipped without one unless named in ``NNX_PPO_GPU_CHECK_STEPS``)."""


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


def accelerator_status() -> dict[str, Any]:
    """:func:`gpu_status`, plus ``"accelerator"``: ``"gpu"``, ``"tpu"`` or None.

    Without an NVIDIA GPU, JAX's default backend (in a child, so that this process does not
    hold the chip: a TPU admits one program at a time) says whether a TPU is there.
    """
    status = gpu_status()
    if status["gpu"]:
        return {**status, "accelerator": "gpu"}
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    probe = "import jax; print(jax.default_backend(), len(jax.devices()))"
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
        )
        backend = done.stdout.split()[0] if done.returncode == 0 and done.stdout else "none"
    except subprocess.TimeoutExpired:
        backend = "none"
    if backend == "tpu":
        return {**status, "accelerator": "tpu", "devices": done.stdout.strip()}
    return {**status, "accelerator": None}


def first_reaching(curve: list[Mapping[str, float]], threshold: float) -> float | None:
    """Wall seconds of the first curve point at or above ``threshold``, or None."""
    for point in curve:
        if point["eval_reward"] >= threshold:
            return float(point["wall_seconds"])
    return None


class Check:
    """The steps' shared clock and the JSON file, rewritten (atomically) after each step."""

    def __init__(
        self, out: Path, budget_s: float, selected: set[str] | None, accelerated: bool
    ) -> None:
        self.out_path = out
        self.deadline = time.monotonic() + budget_s
        self.selected = selected
        self.accelerated = accelerated
        self.out: dict[str, Any] = {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "budget_s": budget_s,
            "steps": {},
        }

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def write(self) -> None:
        tmp = self.out_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.out, indent=2) + "\n")
        tmp.replace(self.out_path)

    def step(self, name: str, timeout_s: float, fn: Callable[[float], dict[str, Any]]) -> None:
        """Runs ``fn(limit)`` with ``limit = min(timeout_s, time left)`` and records it."""
        if self.selected is not None and name not in self.selected:
            self.out["steps"][name] = {"skipped": "not selected"}
        elif name in GPU_STEPS and not self.accelerated and self.selected is None:
            self.out["steps"][name] = {"skipped": "no GPU or TPU"}
        elif (limit := min(timeout_s, self.remaining())) < 10:
            self.out["steps"][name] = {"skipped": "out of time"}
        else:
            _log(f"[gpu-check] {name}: up to {limit:.0f} s")
            start = time.monotonic()
            try:
                result = fn(limit)
            except Exception as error:  # recorded; the other steps still run
                result = {"error": f"{type(error).__name__}: {error}"[:4000]}
            result["seconds"] = round(time.monotonic() - start, 1)
            self.out["steps"][name] = result
            _log(f"[gpu-check] {name}: {json.dumps(result)[:600]}")
        self.write()


def run_tests(timeout_s: float, env: Mapping[str, str]) -> dict[str, Any]:
    """The core subset under pytest, every test run (no ``-x``); counts and failures."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider"]
        + [arg for warning in TPU_START_WARNINGS for arg in ("-W", f"ignore:{warning}")]
        + list(TEST_SUBSET),
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    _log(done.stdout[-6000:] + done.stderr[-2000:])
    lines = done.stdout.strip().splitlines()
    failed = [line.split(" ", 1)[1] for line in lines if re.match(r"^(FAILED|ERROR) ", line)]
    return {"returncode": done.returncode, "summary": lines[-1:], "failed": failed[:40]}


def cartpole(total_steps: int, timeout_s: float) -> dict[str, Any]:
    """Ours and Brax at ``PLAYGROUND_GPU``, each with half of ``timeout_s``."""
    from bench.brax_runner import run_brax_ppo_subprocess
    from bench.nnx_runner import run_nnx_ppo_subprocess
    from bench.settings import PLAYGROUND_GPU

    settings = {**PLAYGROUND_GPU, "total_steps": total_steps, "num_evals": 6}
    out: dict[str, Any] = {"settings": dict(settings)}
    start = time.monotonic()
    for name, runner in (("nnx_ppo", run_nnx_ppo_subprocess), ("brax", run_brax_ppo_subprocess)):
        limit = timeout_s / 2 if name == "nnx_ppo" else timeout_s - (time.monotonic() - start)
        try:
            result = runner(settings, timeout_s=limit)
        except subprocess.SubprocessError as error:
            out[name] = {"error": f"{type(error).__name__}: {error}"[:1000]}
            continue
        out[name] = {
            "env_steps_per_second": result["env_steps_per_second"],
            "compile_seconds": result["compile_seconds"],
            "seconds_to_900": first_reaching(result["curve"], 900.0),
            "final_eval_reward": result["final_eval_reward"],
        }
    if "env_steps_per_second" in out["nnx_ppo"] and "env_steps_per_second" in out["brax"]:
        ours, brax = out["nnx_ppo"], out["brax"]
        out["ratio"] = ours["env_steps_per_second"] / brax["env_steps_per_second"]
    return out


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    from bench import gpu_steps

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--budget-s", type=float, default=510.0, help="all steps together")
    parser.add_argument("--cartpole-steps", type=int, default=10_000_000)
    parser.add_argument("--learning-steps", type=int, default=10_000_000)
    parser.add_argument("--tests-timeout-s", type=float, default=150.0)
    parser.add_argument("--cartpole-timeout-s", type=float, default=160.0)
    parser.add_argument(
        "--learning-envs", help="comma-separated, in this order (default: the table's five)"
    )
    parser.add_argument("--learning-run-timeout-s", type=float, default=120.0, help="per run")
    parser.add_argument(
        "--learning-min-run-s", type=float, default=30.0, help="start no run with less left"
    )
    args = parser.parse_args(argv)
    named = os.environ.get("NNX_PPO_GPU_CHECK_STEPS")
    selected = {"environment", *named.split(",")} if named else None
    status = accelerator_status()
    check = Check(args.out, args.budget_s, selected, status["accelerator"] is not None)
    check.out.update(status)
    check.out["bundle"] = os.environ.get("NNX_PPO_GPU_BUNDLE", "none")
    check.write()
    env = {**os.environ}
    if status["accelerator"] == "gpu":
        env |= {"JAX_PLATFORMS": "cuda", "MUJOCO_GL": "egl"}
    elif status["accelerator"] == "tpu":
        # The tests compare with float32 references: TPU's default matmul precision (bf16
        # passes) would fail them for precision alone. The runs keep each library's own
        # (nnx-ppo trains under "highest" unless told otherwise; Brax under JAX's default).
        env |= {"JAX_PLATFORMS": "tpu", "JAX_DEFAULT_MATMUL_PRECISION": "highest"}
    check.step("environment", 90, gpu_steps.environment)
    check.step("tests", args.tests_timeout_s, lambda limit: run_tests(limit, env))
    check.step(
        "cartpole", args.cartpole_timeout_s, lambda limit: cartpole(args.cartpole_steps, limit)
    )
    check.step("service", 90, lambda limit: gpu_steps.service(limit, env))

    def record(partial: dict[str, Any]) -> None:
        check.out["steps"]["learning"] = partial
        check.write()

    check.step(
        "learning",
        check.remaining(),
        lambda limit: gpu_steps.learning(
            check.remaining,
            args.learning_steps,
            6,
            args.learning_run_timeout_s,
            record,
            envs=args.learning_envs.split(",") if args.learning_envs else None,
            min_run_s=args.learning_min_run_s,
        ),
    )
    check.out["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    check.write()
    print(json.dumps(check.out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
