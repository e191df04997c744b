"""The Ray executor against the local one, side by side in one run (issue 13, "Figures"),
on a real two-node Ray cluster of this machine (``tests.ray_cluster``): two services on
their own data directories, one with the local executor, one with the Ray executor whose
runs are placed on the second node (``resources.node``) and report over HTTP only.

    python -m bench.ray_executor [--rounds 2] [--total-steps 600000]

``throughput``: per round, the same CartpoleBalance run (the service bench's ``speed``
config) through each executor, alternating which goes first; the figure is the median of
the rounds' ratios of steady wall-clock env steps per second (``bench.service_throughput``'s
``summarize``), Ray over local; target >= 0.95.

``latency``: a PointReach run on the second node, followed by a websocket client from its
submit: for every ``metrics`` event, the client's ``time.time()`` on receipt minus the
event's ``wall_time`` (stamped in the run process on the second node when the metric was
reported; same machine, same clock): p50/p95; target p95 < 1 s.

Writes ``bench/results/ray-executor-<time>.json`` with the machine's load before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.runs import write_results
from bench.service_harness import (
    AUTH,
    Service,
    cartpole_spec,
    machine_facts,
    percentiles,
    point_reach_spec,
)
from bench.service_throughput import DATA_ROOT, _root, _service_run
from tests.ray_cluster import two_node_cluster


def _second_node(service: Service, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        nodes = service.client.get("/api/health").json().get("nodes") or []
        second = [n for n in nodes if n["alive"] and "second" in n["total"]]
        if second:
            return str(second[0]["node_id"])
        time.sleep(0.5)
    raise TimeoutError("the Ray service does not list the second node")


def _latency(service: Service, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One run followed live from its submit (see the module doc)."""
    from websockets.sync.client import connect

    run = service.submit(spec)
    received: list[tuple[float, dict[str, Any]]] = []

    def follow() -> None:
        url = f"{service.ws_url}/api/runs/{run['id']}/stream"
        with connect(url, additional_headers=AUTH, open_timeout=60, max_size=None) as ws:
            for message in ws:
                received.append((time.time(), json.loads(message)))

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    final = service.wait_for(run["id"], timeout=timeout)
    follower.join(30)
    metrics = [(now, e) for now, e in received if e["type"] == "metrics"]
    latencies = [now - e["wall_time"] for now, e in metrics]
    seqs = [e["seq"] for _, e in received]
    return {
        "run_id": run["id"],
        "status": final["status"],
        "node": final["node"],
        "metrics_events": len(metrics),
        "seqs_contiguous": seqs == list(range(1, len(seqs) + 1)),
        "latency_s": percentiles(latencies),
        "max_s": max(latencies) if latencies else None,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ray_executor")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--total-steps", type=int, default=600_000)
    parser.add_argument("--eval-every", type=int, default=300_000)
    parser.add_argument("--latency-steps", type=int, default=100_000)
    parser.add_argument("--timeout-s", type=float, default=900)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    before, started = machine_facts(), time.time()
    cache = DATA_ROOT / "jax-throughput"
    root = Path(tempfile.mkdtemp(prefix="ray-executor-", dir=_root()))
    spec = cartpole_spec(args.total_steps, eval_every=args.eval_every)
    rounds: list[dict[str, Any]] = []
    ray_root = Path(tempfile.mkdtemp(prefix="nnx-ray-"))  # short: Ray's socket paths
    with two_node_cluster(ray_root, str(cache)) as (address, _head, _second):
        ray_env = {"NNX_PPO_EXECUTOR": "ray", "NNX_PPO_RAY_ADDRESS": address}
        with (
            Service(root / "local", jax_cache=cache) as local,
            Service(root / "ray-service", jax_cache=cache, env=ray_env) as on_ray,
        ):
            second = _second_node(on_ray)
            remote = {**spec, "resources": {"cpus": 1, "node": second}}
            print("warm-up (fills the compilation cache): local, ray", flush=True)
            warm = cartpole_spec(args.eval_every, eval_every=args.eval_every)
            _service_run(local, warm, args.timeout_s)
            _service_run(on_ray, {**warm, "resources": remote["resources"]}, args.timeout_s)
            for i in range(args.rounds):
                order = ("local", "ray") if i % 2 == 0 else ("ray", "local")
                result: dict[str, Any] = {"order": order, "load_before": os.getloadavg()}
                for side in order:
                    service, side_spec = (local, spec) if side == "local" else (on_ray, remote)
                    result[side] = _service_run(service, side_spec, args.timeout_s)
                result["node"] = on_ray.run(result["ray"]["run_id"])["node"]
                result["wall_ratio"] = result["ray"]["wall_sps"] / result["local"]["wall_sps"]
                rounds.append(result)
                print(
                    f"round {i + 1} ({'/'.join(order)}): wall env steps/s ray "
                    f"{result['ray']['wall_sps']:,.0f} local {result['local']['wall_sps']:,.0f} "
                    f"ratio {result['wall_ratio']:.3f}; load {result['load_before'][0]:.2f}",
                    flush=True,
                )
            latency_spec = {
                **point_reach_spec(args.latency_steps),
                "resources": {"cpus": 1, "node": second},
            }
            latency = _latency(on_ray, latency_spec, args.timeout_s)
            print(f"latency (remote run): {latency['latency_s']}", flush=True)
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(ray_root, ignore_errors=True)
    summary = {
        "median_wall_ratio": statistics.median(r["wall_ratio"] for r in rounds),
        "median_ray_wall_sps": statistics.median(r["ray"]["wall_sps"] for r in rounds),
        "median_local_wall_sps": statistics.median(r["local"]["wall_sps"] for r in rounds),
        "remote_metric_to_ws_p95_s": latency["latency_s"].get("p95"),
        "target_ratio": 0.95,
        "target_p95_s": 1.0,
    }
    summary["pass"] = (
        summary["median_wall_ratio"] >= 0.95 and (summary["remote_metric_to_ws_p95_s"] or 9) < 1
    )
    print(json.dumps(summary, indent=1))
    payload = {
        "benchmark": "ray-executor",
        "command": "python -m bench.ray_executor " + " ".join(argv or sys.argv[1:]),
        "machine_before": before,
        "machine_after": machine_facts(),
        "wall_seconds": time.time() - started,
        "settings": {**vars(args), "spec": spec},
        "rounds": rounds,
        "latency": latency,
        "summary": summary,
    }
    print(f"wrote {write_results('ray-executor', payload)}")


if __name__ == "__main__":
    main()
