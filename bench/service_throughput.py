"""Training through the service against ``train_ppo`` called directly, and the compilation
cache's effect on a second run.

``throughput``: one service (``nnx-ppo serve``, its supervisor and a spawned run process per
run) and, alternating with its runs, fresh ``python -m bench.service direct-run`` processes
that build the same config (``server.spec.spec_check.make_config`` of the same spec, as the run
process does), env and network and call ``train_ppo`` with a ``log_fn`` that only records
the time. Both use one warm compilation cache (a warm-up run of each fills it first).

Both sides are summarised from the same data, the logged metrics with their wall times
(service: the ``metrics`` events' ``wall_time``, stamped by the run process when it stores
them; direct: ``time.time()`` in ``log_fn``), by :func:`summarize`:

* ``wall_sps``: env steps per second of wall time between the logging of the first jitted
  call's last iteration and the logging of the second-to-last call's last iteration. It
  leaves out the first call (compilation) and the last (final evaluation and checkpoint),
  and includes everything else the host does between calls: metric logging (the service
  writes them to SQLite), evaluations (the same in both), cancel checks.
* ``call_sps``: ``train_ppo``'s own ``throughput/env_steps_per_second`` (the jitted calls'
  time only, host work excluded), summed over every call after the first, as
  ``bench.nnx_runner`` does: it shows whether the training computation itself is slower.

``compile-cache``: a service with a new, empty compilation cache runs the same CartpoleBalance
config twice, one after the other, and reports for each run the time from its ``running``
status event to its first metric event (process start, imports, env and network set-up,
compilation, and the first jitted call with its evaluation), and the same from the run's
"compiling and training" log event (compilation and the first call only).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.runs import REPO_ROOT
from bench.service_harness import Service, cartpole_spec

SPS_KEY = "throughput/env_steps_per_second"
EVAL_KEY = "eval/episode_reward"
DATA_ROOT = REPO_ROOT / "bench/.cache/service"


# -- the summary both sides share ------------------------------------------------------


def summarize(points: Sequence[dict[str, Any]], start_time: float) -> dict[str, Any]:
    """Throughput from logged metrics ``[{"step", "wall_time", "values"}]`` in step order
    (see the module doc); ``start_time`` is when the run began (service: its ``running``
    event; direct: before ``train_ppo``)."""
    ends = [p for p in points if SPS_KEY in p["values"]]
    base = {
        "jitted_calls": len(ends),
        "iterations_logged": len(points),
        "total_steps": points[-1]["step"],
        "start_to_first_metric_s": points[0]["wall_time"] - start_time,
        "eval_rewards": [float(p["values"][EVAL_KEY]) for p in ends if EVAL_KEY in p["values"]],
        # Logging of the first call's last iteration to the second's: one steady call.
        "second_call_s": ends[1]["wall_time"] - ends[0]["wall_time"] if len(ends) > 1 else None,
    }
    if len(ends) < 4:  # too short for a steady window (a warm-up run)
        return base
    steps = [p["step"] for p in ends]
    calls = [b - a for a, b in zip([0, *steps[:-1]], steps, strict=True)]
    seconds = [n / float(p["values"][SPS_KEY]) for n, p in zip(calls, ends, strict=True)]
    first, last = ends[0], ends[-2]
    wall = last["wall_time"] - first["wall_time"]
    return {
        "wall_sps": (last["step"] - first["step"]) / wall,
        "call_sps": sum(calls[1:]) / sum(seconds[1:]),
        "window_steps": last["step"] - first["step"],
        "window_seconds": wall,
        "host_seconds_in_window": wall - sum(seconds[1:-1]),
        **base,
    }


# -- the direct side: one fresh process per run ------------------------------------------


def direct_run(argv: list[str]) -> None:
    """Subcommand ``direct-run --spec JSON --cache DIR``: ``train_ppo`` on the spec's env,
    network and config, printing the logged points as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m bench.service direct-run")
    parser.add_argument("--spec", required=True)
    parser.add_argument("--cache", required=True)
    args = parser.parse_args(argv)
    spec = json.loads(args.spec)

    from nnx_ppo import envs
    from nnx_ppo.algorithms.training import train_ppo
    from nnx_ppo.presets import make_networks
    from nnx_ppo.utils import enable_compilation_cache
    from server.schemas import NetworkSpec
    from server.spec.spec_check import make_config

    enable_compilation_cache(args.cache)
    config = make_config(spec["kind"], spec["config"])
    env = envs.load(spec["env"]["name"], spec["env"].get("overrides") or {})
    network = NetworkSpec(**spec["network"]).factory_fields()
    points: list[dict[str, Any]] = []

    def log_fn(metrics: dict[str, Any], step: int) -> None:
        values = {key: float(value) for key, value in metrics.items()}
        points.append({"step": step, "wall_time": time.time(), "values": values})

    start = time.time()
    networks = make_networks(network, env.observation_size, env.action_size, config.seed)
    train_ppo(env, networks, config, log_fn=log_fn)
    print(json.dumps({"start_time": start, "points": points}), flush=True)


def _direct(spec: dict[str, Any], cache: Path, timeout: float) -> dict[str, Any]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    command = [sys.executable, "-m", "bench.service", "direct-run"]
    command += ["--spec", json.dumps(spec), "--cache", str(cache)]
    proc = subprocess.run(
        command,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
        env=env,
        # Its own session, as the service has: with the kernel's autogroup scheduling, CPU
        # is shared between sessions first, so both sides must be alike in this.
        start_new_session=True,
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return summarize(out["points"], out["start_time"])


# -- the service side --------------------------------------------------------------------


def _service_run(service: Service, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    run = service.submit(spec)
    final = service.wait_for(run["id"], timeout=timeout)
    if final["status"] != "succeeded":
        raise RuntimeError(f"run {run['id']} {final['status']}: {final.get('error')}")
    events = service.events(run["id"])
    points = [e for e in events if e["type"] == "metrics"]
    running = next(e for e in events if e["type"] == "status" and e["status"] == "running")
    compiling = next(
        (e for e in events if e["type"] == "log" and e["line"].startswith("compiling")), None
    )
    summary = summarize(points, running["time"])
    summary["run_id"] = run["id"]
    summary["events"] = len(events)
    summary["seqs_contiguous"] = [e["seq"] for e in events] == list(range(1, len(events) + 1))
    startup = next(
        (e for e in events if e["type"] == "log" and e["line"].startswith("JAX start-up")), None
    )
    if startup is not None:  # "JAX start-up so far: tracing 4.5 s, lowering 1.2 s, ..."
        phases = startup["line"].split(": ", 1)[1].split(", ")
        summary["jax_phases_s"] = {p.rsplit(" ", 2)[0]: float(p.rsplit(" ", 2)[1]) for p in phases}
    if compiling is not None:
        summary["compiling_log_to_first_metric_s"] = points[0]["wall_time"] - compiling["time"]
        if summary["second_call_s"] is not None:
            # Compilation alone: the first call's time minus a steady call's.
            summary["compile_estimate_s"] = (
                points[0]["wall_time"] - compiling["time"] - summary["second_call_s"]
            )
    return summary


# -- throughput --------------------------------------------------------------------------


def throughput(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.service throughput")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--total-steps", type=int, default=3_000_000)
    parser.add_argument("--eval-every", type=int, default=1_000_000)
    parser.add_argument("--warmup-steps", type=int, default=1_000_000)
    parser.add_argument("--timeout-s", type=float, default=900)
    args = parser.parse_args(argv)
    spec = cartpole_spec(args.total_steps, eval_every=args.eval_every)
    warm = cartpole_spec(args.warmup_steps, eval_every=args.eval_every)
    cache = DATA_ROOT / "jax-throughput"
    data_dir = Path(tempfile.mkdtemp(prefix="throughput-", dir=_root()))
    rounds: list[dict[str, Any]] = []
    with Service(data_dir, jax_cache=cache) as service:
        print("warm-up (fills the compilation cache): service, direct", flush=True)
        warmup = {
            "service": _service_run(service, warm, args.timeout_s),
            "direct": _direct(warm, cache, args.timeout_s),
        }
        for i in range(args.rounds):
            order = ("direct", "service") if i % 2 == 0 else ("service", "direct")
            result: dict[str, Any] = {"order": order, "load_before": os.getloadavg()}
            for side in order:
                if side == "direct":
                    result[side] = _direct(spec, cache, args.timeout_s)
                else:
                    result[side] = _service_run(service, spec, args.timeout_s)
            result["wall_ratio"] = result["service"]["wall_sps"] / result["direct"]["wall_sps"]
            result["call_ratio"] = result["service"]["call_sps"] / result["direct"]["call_sps"]
            rounds.append(result)
            print(
                f"round {i + 1} ({'/'.join(order)}): wall env steps/s "
                f"service {result['service']['wall_sps']:,.0f} "
                f"direct {result['direct']['wall_sps']:,.0f} ratio {result['wall_ratio']:.3f}; "
                f"jitted calls only: ratio {result['call_ratio']:.3f}; "
                f"load {result['load_before'][0]:.2f}",
                flush=True,
            )
    shutil.rmtree(data_dir, ignore_errors=True)
    wall = [r["wall_ratio"] for r in rounds]
    summary = {
        "median_wall_ratio": statistics.median(wall),
        "median_call_ratio": statistics.median(r["call_ratio"] for r in rounds),
        "median_service_wall_sps": statistics.median(r["service"]["wall_sps"] for r in rounds),
        "median_direct_wall_sps": statistics.median(r["direct"]["wall_sps"] for r in rounds),
        "target_ratio": 0.95,
    }
    summary["pass"] = summary["median_wall_ratio"] >= 0.95
    print(json.dumps(summary, indent=1))
    return {
        "settings": {**vars(args), "spec": spec},
        "warmup": warmup,
        "rounds": rounds,
        "summary": summary,
    }


# -- compile cache -----------------------------------------------------------------------


def compile_cache(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.service compile-cache")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--total-steps", type=int, default=4 * 163_840)
    parser.add_argument("--timeout-s", type=float, default=900)
    args = parser.parse_args(argv)
    # An evaluation after the first jitted call (32 iterations), so that the first metric
    # comes after both the training step's and the evaluator's compilation.
    spec = cartpole_spec(args.total_steps, eval_every=163_840)
    root = Path(tempfile.mkdtemp(prefix="compile-cache-", dir=_root()))
    cache = root / "jax_cache"
    cache.mkdir()
    runs = []
    with Service(root / "data", jax_cache=cache) as service:
        for i in range(args.runs):
            entries_before = sum(1 for p in cache.rglob("*") if p.is_file())
            result = _service_run(service, spec, args.timeout_s)
            result["cache_entries_before"] = entries_before
            runs.append(result)
            print(
                f"run {i + 1}: running -> first metric {result['start_to_first_metric_s']:.1f} s"
                f", 'compiling' log -> first metric "
                f"{result.get('compiling_log_to_first_metric_s', float('nan')):.1f} s "
                f"(cache entries before: {entries_before}); compilation alone (minus a "
                f"steady call) {result.get('compile_estimate_s', float('nan')):.1f} s",
                flush=True,
            )
    shutil.rmtree(root, ignore_errors=True)
    first, second = runs[0], runs[1]
    ratio = second["start_to_first_metric_s"] / first["start_to_first_metric_s"]
    compile_ratio = (
        second["compiling_log_to_first_metric_s"] / first["compiling_log_to_first_metric_s"]
    )
    summary = {
        "first_s": first["start_to_first_metric_s"],
        "second_s": second["start_to_first_metric_s"],
        "ratio": ratio,
        "first_compiling_log_to_metric_s": first["compiling_log_to_first_metric_s"],
        "second_compiling_log_to_metric_s": second["compiling_log_to_first_metric_s"],
        "compiling_ratio": compile_ratio,
        "first_compile_estimate_s": first.get("compile_estimate_s"),
        "second_compile_estimate_s": second.get("compile_estimate_s"),
        "compile_estimate_ratio": second["compile_estimate_s"] / first["compile_estimate_s"],
        "first_jax_phases_s": first.get("jax_phases_s"),
        "second_jax_phases_s": second.get("jax_phases_s"),
        "target_ratio": 0.25,
        "pass_running_to_first_metric": ratio < 0.25,
        "pass": second["compile_estimate_s"] / first["compile_estimate_s"] < 0.25,
    }
    if first.get("jax_phases_s") and second.get("jax_phases_s"):
        xla = [r["jax_phases_s"]["XLA compile"] for r in (first, second)]
        summary["xla_compile_ratio"] = xla[1] / xla[0] if xla[0] else None
    print(json.dumps(summary, indent=1))
    return {"settings": {**vars(args), "spec": spec}, "runs": runs, "summary": summary}


def _root() -> Path:
    DATA_ROOT.mkdir(parents=True, exist_ok=True)
    return DATA_ROOT
