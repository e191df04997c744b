"""Live streaming: how soon a logged metric reaches a websocket client, and 100 clients
following one run while another client polls the API.

``latency``: one service; per repeat, a PointReach run of a few hundred PPO iterations (the
tests' tiny spec) and one websocket client connected right after the submit. For every
``metrics`` event that was stored after the client connected, the latency is the client's
``time.time()`` on receipt minus the event's ``wall_time`` (stamped by the run process when it
stores the metric; same machine, same clock).

``fanout``: per repeat, two runs of the same spec one after the other, side by side: first
with only the API poller, then with ``--clients`` websocket clients (in a separate process,
one asyncio loop) plus the poller. The poller (this process) calls ``GET /api/runs``,
``GET /api/runs/{id}`` and ``GET /api/runs/{id}/metrics`` back to back for as long as the run
trains, timing each request. Every client must receive seqs 1..N without a gap, N being the
run's last event (its terminal status), and every client's sequence of messages must be
byte-identical (compared by SHA-256).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing as mp
import os
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.service_harness import (
    AUTH,
    TERMINAL,
    Service,
    cpu_seconds,
    percentiles,
    point_reach_spec,
)
from bench.service_throughput import DATA_ROOT, _root

STREAM_CACHE = DATA_ROOT / "jax-stream"


# -- websocket followers ------------------------------------------------------------------


async def _follow(url: str, connected: list[float]) -> dict[str, Any]:
    from websockets.asyncio.client import connect

    digest = hashlib.sha256()
    seqs: list[int] = []
    latencies: list[float] = []
    keys = 0
    stored: list[float] = []
    async with connect(url, additional_headers=AUTH, open_timeout=60, max_size=None) as ws:
        connected.append(time.time())
        t_connect = connected[-1]
        try:
            async for message in ws:
                now = time.time()
                digest.update(message.encode() if isinstance(message, str) else message)
                digest.update(b"\n")
                event = json.loads(message)
                seqs.append(event["seq"])
                if event["type"] == "metrics":
                    keys = max(keys, len(event["values"]))
                    if event["wall_time"] > t_connect:
                        latencies.append(now - event["wall_time"])
                        stored.append(event["time"] - event["wall_time"])
        except Exception as error:
            return {
                "seqs": seqs,
                "latencies": latencies,
                "stored": stored,
                "keys": keys,
                "error": repr(error),
            }
        return {
            "seqs": seqs,
            "latencies": latencies,
            "stored": stored,
            "keys": keys,
            "sha256": digest.hexdigest(),
            "close_code": ws.close_code,
        }


async def _follow_many(url: str, n: int) -> list[dict[str, Any]]:
    connected: list[float] = []
    return await asyncio.gather(*(_follow(url, connected) for _ in range(n)))


def _clients_process(url: str, n: int, conn: Any) -> None:
    """Child process: ``n`` followers in one asyncio loop; sends their results back, and
    this process's CPU seconds as the last element."""
    results = asyncio.run(_follow_many(url, n))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    conn.send([*results, {"cpu_seconds": usage.ru_utime + usage.ru_stime}])
    conn.close()


def _check_clients(results: list[dict[str, Any]], last_seq: int) -> dict[str, Any]:
    expected = list(range(1, last_seq + 1))
    complete = [r["seqs"] == expected for r in results]
    hashes = {r.get("sha256") for r in results}
    latencies = [x for r in results for x in r["latencies"]]
    return {
        "clients": len(results),
        "last_seq": last_seq,
        "clients_complete": sum(complete),
        "all_identical": len(hashes) == 1 and None not in hashes,
        "event_counts": sorted({len(r["seqs"]) for r in results}),
        "errors": [r["error"] for r in results if "error" in r][:5],
        "close_codes": sorted({str(r.get("close_code")) for r in results}),
        "latency_s": percentiles(latencies),
        "wall_time_to_event_time_s": percentiles([x for r in results for x in r["stored"]]),
        "max_keys_per_metrics_event": max((r.get("keys", 0) for r in results), default=0),
    }


# -- latency -----------------------------------------------------------------------------


def latency(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.service latency")
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    spec = point_reach_spec(args.iterations * 160)
    data_dir = Path(tempfile.mkdtemp(prefix="latency-", dir=_root()))
    runs = []
    with Service(data_dir, jax_cache=STREAM_CACHE) as service:
        for i in range(args.repeats):
            run = service.submit(spec)
            url = f"{service.ws_url}/api/runs/{run['id']}/stream?after_seq=0"
            [result] = asyncio.run(_follow_many(url, 1))
            final = service.run(run["id"])
            checked = _check_clients([result], result["seqs"][-1] if result["seqs"] else 0)
            checked.update(run_id=run["id"], status=final["status"], steps=final["steps"])
            checked["latencies"] = result["latencies"]
            checked["stored"] = result["stored"]
            runs.append(checked)
            lat = checked["latency_s"]
            print(
                f"repeat {i + 1}: {lat['n']} live metric events, latency p50 "
                f"{lat['p50'] * 1000:.0f} ms, p95 {lat['p95'] * 1000:.0f} ms, "
                f"max {lat['max'] * 1000:.0f} ms; of which wall_time -> stored event time p50 "
                f"{checked['wall_time_to_event_time_s']['p50'] * 1000:.0f} ms; "
                f"{checked['max_keys_per_metrics_event']} keys per event",
                flush=True,
            )
    shutil.rmtree(data_dir, ignore_errors=True)
    overall = percentiles([x for r in runs for x in r.pop("latencies")])
    stored = percentiles([x for r in runs for x in r.pop("stored")])
    summary = {
        "latency_s": overall,
        "wall_time_to_event_time_s": stored,
        "target_p95_s": 1.0,
        "pass": overall["p95"] < 1.0,
    }
    print(json.dumps(summary, indent=1))
    return {"settings": {**vars(args), "spec": spec}, "runs": runs, "summary": summary}


# -- fan-out -----------------------------------------------------------------------------


def _poll(service: Service, run_id: str, stop: Any) -> dict[str, list[float]]:
    """Back-to-back GETs until ``stop()``; per endpoint, the latencies in ms."""
    paths = {
        "list": "/api/runs",
        "run": f"/api/runs/{run_id}",
        "metrics": f"/api/runs/{run_id}/metrics",
    }
    times: dict[str, list[float]] = {name: [] for name in paths}
    statuses: set[int] = set()
    with httpx.Client(base_url=service.url, headers=AUTH, timeout=60) as client:
        while not stop():
            for name, path in paths.items():
                t = time.perf_counter()
                response = client.get(path)
                times[name].append((time.perf_counter() - t) * 1000)
                statuses.add(response.status_code)
    times["_statuses"] = sorted(statuses)  # type: ignore[assignment]
    return times


def _one_fanout(service: Service, spec: dict[str, Any], clients: int) -> dict[str, Any]:
    assert service.process is not None
    api_cpu_start = cpu_seconds(service.process.pid)
    run = service.submit(spec)
    run_id = run["id"]
    conn = None
    process = None
    if clients:
        url = f"{service.ws_url}/api/runs/{run_id}/stream?after_seq=0"
        ctx = mp.get_context("spawn")
        conn, child = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_clients_process, args=(url, clients, child))
        process.start()
        child.close()
    # Poll while the run trains (from its running status to its end).
    service.wait_for(run_id, ("running", *TERMINAL), timeout=300)
    last = {"t": 0.0, "status": "running"}

    def stop() -> bool:
        now = time.monotonic()
        if now - last["t"] > 0.5:
            last["t"] = now
            last["status"] = httpx.get(f"{service.url}/api/runs/{run_id}", headers=AUTH).json()[
                "status"
            ]
        return last["status"] in TERMINAL

    api_cpu = cpu_seconds(service.process.pid)
    started = time.monotonic()
    times = _poll(service, run_id, stop)
    polled_s = time.monotonic() - started
    api_cpu = cpu_seconds(service.process.pid) - api_cpu
    statuses = times.pop("_statuses")
    final = service.run(run_id)
    out: dict[str, Any] = {
        "run_id": run_id,
        "status": final["status"],
        "steps": final["steps"],
        "clients": clients,
        "polled_seconds": polled_s,
        "api_process_cpu_seconds_while_polled": api_cpu,
        "load_after": os.getloadavg(),
        "http_statuses": statuses,
        "api_ms": {name: percentiles(ts, (50, 99)) for name, ts in times.items()},
        "api_ms_all": percentiles([t for ts in times.values() for t in ts], (50, 99)),
    }
    if process is not None and conn is not None:
        results = conn.recv() if conn.poll(300) else [{}]
        process.join(30)
        out["clients_process_cpu_seconds"] = results.pop().get("cpu_seconds")
        # From the submit until every follower has the terminal event.
        out["api_process_cpu_seconds_total"] = cpu_seconds(service.process.pid) - api_cpu_start
        sends = sum(len(r["seqs"]) for r in results)
        out["api_cpu_us_per_event_sent"] = out["api_process_cpu_seconds_total"] / sends * 1e6
        replay = service.events(run_id)
        out["followers"] = _check_clients(results, replay[-1]["seq"] if replay else 0)
        out["followers"]["replay_events"] = len(replay)
        out["followers"]["client0_latencies_s"] = results[0]["latencies"] if results else []
    return out


def fanout(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.service fanout")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    spec = point_reach_spec(args.iterations * 160)
    data_dir = Path(tempfile.mkdtemp(prefix="fanout-", dir=_root()))
    phases = []
    with Service(data_dir, jax_cache=STREAM_CACHE) as service:
        for i in range(args.repeats):
            for clients in (0, args.clients):
                result = _one_fanout(service, spec, clients)
                result["repeat"] = i + 1
                phases.append(result)
                api = result["api_ms_all"]
                line = (
                    f"repeat {i + 1}, {clients:3d} clients: API p50 {api['p50']:.1f} ms "
                    f"p99 {api['p99']:.1f} ms max {api['max']:.0f} ms over {api['n']} requests"
                    f"; API process CPU {result['api_process_cpu_seconds_while_polled']:.1f} s"
                    f" in {result['polled_seconds']:.1f} s"
                )
                if "followers" in result:
                    f = result["followers"]
                    line += (
                        f"; followers complete {f['clients_complete']}/{f['clients']}, "
                        f"identical {f['all_identical']}, events {f['event_counts']}, "
                        f"latency p95 {f['latency_s'].get('p95', float('nan')) * 1000:.0f} ms"
                        f"; API CPU {result['api_cpu_us_per_event_sent']:.0f} us per event sent"
                    )
                print(line, flush=True)
    shutil.rmtree(data_dir, ignore_errors=True)
    with_clients = [p for p in phases if p["clients"]]
    p99 = statistics.median(p["api_ms_all"]["p99"] for p in with_clients)
    complete = all(
        p["followers"]["clients_complete"] == p["clients"] and p["followers"]["all_identical"]
        for p in with_clients
    )
    summary = {
        "api_p99_ms_with_clients_median": p99,
        "api_p99_ms_without_clients_median": statistics.median(
            p["api_ms_all"]["p99"] for p in phases if not p["clients"]
        ),
        "all_followers_complete_and_identical": complete,
        "target_p99_ms": 100,
        "pass": complete and p99 < 100,
    }
    print(json.dumps(summary, indent=1))
    return {"settings": {**vars(args), "spec": spec}, "phases": phases, "summary": summary}
