"""What every benchmark runner shares: fresh-process runs, the settings CLI, memory, caches.

A runner module (``bench.brax_runner``, ``bench.nnx_runner``) exposes ``main(argv)`` that
reads a settings dict with :func:`settings_from_cli`, trains once and prints its result dict as
one JSON line; :func:`run_runner_subprocess` runs such a module in a fresh Python process and
parses that line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.jax_setup import CACHE_DIR_ENV
from bench.settings import PRESETS

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The checkout root: child processes run here so that ``bench`` imports."""

RESULTS_DIR = Path(__file__).resolve().parent / "results"
"""Where the comparison and learning scripts write their JSON."""


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def count_files(path: Path) -> int:
    """Files under ``path``, recursively (to count new compilation-cache entries)."""
    return sum(1 for p in path.rglob("*") if p.is_file())


def run_runner_subprocess(
    module: str,
    settings: Mapping[str, Any],
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """Runs ``python -m <module> --json <settings>`` and returns the result it printed.

    A fresh process gives a clean ``peak_rss_mb`` and no in-memory jit cache. The child's
    stderr passes through; its stdout's last line must be the result as JSON.

    Args:
        module: A runner module, e.g. ``bench.nnx_runner``.
        settings: The settings dict (JSON-serialisable; tuples become lists).
        env: Extra environment variables for the child (e.g. :data:`CACHE_DIR_ENV`).
        timeout_s: Kill the child after this many seconds.

    Raises:
        subprocess.CalledProcessError: If the child fails.
        subprocess.TimeoutExpired: After ``timeout_s``.
    """
    proc = subprocess.run(
        [sys.executable, "-m", module, "--json", json.dumps(dict(settings))],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        timeout=timeout_s,
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def fresh_cache_env(enabled: bool = True) -> Iterator[dict[str, str]]:
    """Environment variables pointing a child's compilation cache at a new, empty directory.

    The directory is removed on exit. With ``enabled`` False, yields ``{}`` (the child then
    uses the shared cache in ``bench/.cache``, and its compile times are warm-cache times).
    """
    if not enabled:
        yield {}
        return
    with tempfile.TemporaryDirectory(prefix="nnx-ppo-bench-cache-") as path:
        yield {CACHE_DIR_ENV: path}


def settings_from_cli(argv: Sequence[str] | None, description: str) -> dict[str, Any]:
    """Parses a runner's ``--preset NAME`` and ``--json '{...}'`` into one settings dict."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--preset", choices=sorted(PRESETS), help="start from a named preset")
    parser.add_argument(
        "--json", default="{}", help="settings as a JSON object; overrides the preset's keys"
    )
    args = parser.parse_args(argv)
    overrides = json.loads(args.json)
    if not isinstance(overrides, dict):
        parser.error(f"--json must be a JSON object, got {args.json!r}")
    base = PRESETS[args.preset] if args.preset else {}
    return {**base, **overrides}


def write_results(kind: str, payload: Mapping[str, Any], path: Path | None = None) -> Path:
    """Writes ``payload`` as JSON to ``path`` or a new ``bench/results/<kind>-<time>.json``.

    The file is replaced atomically (written as ``.tmp``, then renamed), so a reader never
    sees half a file; call it again with the returned path to update it.
    """
    if path is None:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        path = RESULTS_DIR / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=1) + "\n")
    tmp.replace(path)
    return path


def startup_seconds(
    first_eval: Mapping[str, float],
    evals_run: int,
    env_steps_per_second: float,
    eval_seconds: float,
) -> float:
    """Start-up overhead, defined alike for both libraries (``compile_seconds``).

    Wall time from the start of training to the end of the first evaluation after training,
    minus the training and the evaluations that ran in it, each at its steady speed. What is
    left is network and optimizer init, env reset, and every compilation up to that point
    (training step, evaluator; Brax compiles its eval unroll twice, at step 0 and after the
    first epoch, as the inputs' weak types and shardings change).

    Args:
        first_eval: The curve point (``step``, ``wall_seconds``) of that evaluation.
        evals_run: Evaluations up to and including it (Brax 2, with step 0; nnx-ppo 1).
        env_steps_per_second: Steady-state training throughput.
        eval_seconds: Steady time of one evaluation.
    """
    train = first_eval["step"] / env_steps_per_second
    return first_eval["wall_seconds"] - train - evals_run * eval_seconds


def add_run_options(parser: argparse.ArgumentParser, whose: str) -> None:
    """Adds the options that ``compare`` and ``learning`` share (see :func:`run_overrides`).

    Args:
        parser: The script's parser.
        whose: Which presets the overrides apply to, for the help text.
    """
    parser.add_argument("--total-steps", type=int, help=f"override {whose} total_steps")
    parser.add_argument("--num-evals", type=int, help=f"override {whose} num_evals")
    parser.add_argument(
        "--cache",
        choices=("fresh", "shared"),
        default="fresh",
        help="compilation cache per run: a new empty one (cold compile) or bench/.cache",
    )
    parser.add_argument("--timeout-s", type=float, help="kill a run after this many seconds")


def run_overrides(args: argparse.Namespace) -> dict[str, int]:
    """The settings that ``--total-steps`` and ``--num-evals`` override, where given."""
    given = {"total_steps": args.total_steps, "num_evals": args.num_evals}
    return {key: value for key, value in given.items() if value is not None}
