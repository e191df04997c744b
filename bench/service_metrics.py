"""``GET /api/runs/{id}/metrics?max_points=1000`` over a run with 1,000,000 stored points.

Two data directories, each holding one finished run whose points were written through the
real store path (``RunStore.record_metrics``, one call per step, which also maintains the
rollups that the query reads): 10 keys x 100,000 steps, and 1 key x 1,000,000 steps. Steps
are spaced like a real run's (5,120 env steps per iteration), values are a random walk.

The fill stores ``BATCH`` steps per ``RunStore.record_metrics_batch`` call (the path a run
process's reporter takes; ``record_metrics`` one step at a time where the store has no batch
method) with an engine whose connections add ``PRAGMA synchronous=OFF`` (the rows are the
same; only the fsync per transaction is skipped). How long one step takes to write with the
service's own engine (``synchronous=FULL``, as a run process writes) is measured separately
on a scratch database, one ``record_metrics`` call per step and ``BATCH`` steps per
``record_metrics_batch`` call. A filled directory is
reused by later invocations (``filled.json`` marks it complete).

Then the service is started on each directory (``--no-worker``) and the query is timed:
``requests`` times with all keys and ``requests`` times with one key, alternating, after one
untimed request (reported as ``first_ms``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.runs import REPO_ROOT
from bench.service_harness import Service, cartpole_spec

STEP_SPACING = 5120
BATCH = 32
"""Steps per ``record_metrics_batch`` call in the fill: one jitted call's iterations, which
is what a run process's reporter stores in one transaction when training outpaces it."""
FILLED = "filled.json"


def _store(data_dir: Path, *, durable: bool, database_url: str | None = None) -> Any:
    from sqlalchemy import event

    from server.store.db import make_engine, make_sessionmaker, migrate
    from server.store.run_store import RunStore

    data_dir.mkdir(parents=True, exist_ok=True)
    url = database_url or f"sqlite:///{(data_dir / 'nnx_ppo.db').resolve()}"
    migrate(url)
    engine = make_engine(url)
    if not durable and database_url is None:

        @event.listens_for(engine, "connect")
        def _fast(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.execute("PRAGMA synchronous=OFF")

    return RunStore(make_sessionmaker(engine), data_dir / "runs"), engine


def _new_run(store: Any, n_steps: int) -> str:
    spec = cartpole_spec(n_steps * STEP_SPACING)
    run = store.create(
        spec, kind="ppo", name="bench-metrics", tags=["bench"], notes="", total_steps=n_steps
    )
    store.transition(run.id, "start", worker_id=None, started_at=time.time(), attempts=1)
    return run.id


def _walk(n_keys: int, seed: int = 0) -> Any:
    rng = random.Random(seed)
    values = [0.0] * n_keys

    def step() -> dict[str, float]:
        for i in range(n_keys):
            values[i] += rng.gauss(0.0, 1.0)
        return {f"metric/k{i:02d}": values[i] for i in range(n_keys)}

    return step


def fill(
    data_dir: Path, n_keys: int, n_steps: int, database_url: str | None = None
) -> dict[str, Any]:
    """Writes one run of ``n_steps`` x ``n_keys`` points; returns its id and write timing."""
    marker = data_dir / FILLED
    if marker.exists():
        return json.loads(marker.read_text())
    if data_dir.exists():
        raise RuntimeError(f"{data_dir} exists but is not complete; remove it")
    store, engine = _store(data_dir, durable=False, database_url=database_url)
    run_id = _new_run(store, n_steps)
    values = _walk(n_keys)
    t0 = time.perf_counter()
    wall = time.time()
    batched = hasattr(store, "record_metrics_batch")
    for start in range(1, n_steps + 1, BATCH):
        steps = range(start, min(n_steps, start + BATCH - 1) + 1)
        entries = [(i * STEP_SPACING, wall + i * 0.01, values()) for i in steps]
        if batched:
            store.record_metrics_batch(run_id, entries)
        else:
            for entry in entries:
                store.record_metrics(run_id, *entry)
        i = steps[-1]
        if i % 50_000 == 0:
            rate = (time.perf_counter() - t0) / i * 1000
            print(f"  {data_dir.name}: {i:,}/{n_steps:,} steps, {rate:.2f} ms/step", flush=True)
    seconds = time.perf_counter() - t0
    store.transition(run_id, "finish")
    engine.dispose()
    out = {
        "run_id": run_id,
        "n_keys": n_keys,
        "n_steps": n_steps,
        "points": n_keys * n_steps,
        "fill_seconds": seconds,
        "fill_ms_per_step_synchronous_off": seconds / n_steps * 1000,
        "fill_method": f"record_metrics_batch, {BATCH} steps a call"
        if batched
        else "record_metrics, one step a call",
        "db_bytes": sum(p.stat().st_size for p in data_dir.glob("nnx_ppo.db*")),
    }
    marker.write_text(json.dumps(out))
    return out


def durable_write_ms(n_keys: int, n_steps: int, database_url: str | None = None) -> dict[str, Any]:
    """ms per step written with the service's own engine (``synchronous=FULL``, WAL) on a
    scratch database: one ``record_metrics`` call per step, and (where the store has it)
    ``BATCH`` steps per ``record_metrics_batch`` call; ``n_steps`` steps each."""
    out: dict[str, Any] = {"n_keys": n_keys, "steps": n_steps}
    with tempfile.TemporaryDirectory(prefix="nnx-ppo-bench-write-") as tmp:
        store, engine = _store(Path(tmp), durable=True, database_url=database_url)
        values = _walk(n_keys)
        run_id = _new_run(store, n_steps)
        times = []
        for i in range(1, n_steps + 1):
            point = values()
            t = time.perf_counter()
            store.record_metrics(run_id, i * STEP_SPACING, time.time(), point)
            times.append((time.perf_counter() - t) * 1000)
        out["one_step_per_call_median_ms"] = statistics.median(times)
        out["one_step_per_call_mean_ms"] = statistics.fmean(times)
        if hasattr(store, "record_metrics_batch"):
            run_id = _new_run(store, n_steps)
            t = time.perf_counter()
            for start in range(1, n_steps + 1, BATCH):
                steps = range(start, min(n_steps, start + BATCH - 1) + 1)
                entries = [(i * STEP_SPACING, time.time(), values()) for i in steps]
                store.record_metrics_batch(run_id, entries)
            out[f"batch_{BATCH}_mean_ms_per_step"] = (time.perf_counter() - t) / n_steps * 1000
        engine.dispose()
    return out


def query(
    data_dir: Path, run_id: str, n_keys: int, requests: int, database_url: str | None = None
) -> dict[str, Any]:
    """Times the metrics request on the service started on ``data_dir``."""
    jax_cache = data_dir.parent / "jax-unused"
    env = {"NNX_PPO_DATABASE_URL": database_url} if database_url else None
    with Service(data_dir, jax_cache=jax_cache, worker=False, env=env) as service:
        urls = {
            "all_keys": f"/api/runs/{run_id}/metrics?max_points=1000",
            "one_key": f"/api/runs/{run_id}/metrics?max_points=1000&keys=metric/k00",
        }
        out: dict[str, Any] = {}
        first = {}
        for name, url in urls.items():
            t = time.perf_counter()
            response = service.client.get(url)
            first[name] = (time.perf_counter() - t) * 1000
            response.raise_for_status()
        times: dict[str, list[float]] = {name: [] for name in urls}
        shapes: dict[str, Any] = {}
        for _ in range(requests):
            for name, url in urls.items():
                t = time.perf_counter()
                response = service.client.get(url)
                times[name].append((time.perf_counter() - t) * 1000)
                response.raise_for_status()
                series = response.json()["series"]
                shapes[name] = {
                    "keys": len(series),
                    "points_per_key": max(len(s["step"]) for s in series.values()),
                    "bytes": len(response.content),
                }
        for name in urls:
            out[name] = {
                "url": urls[name],
                "first_ms": first[name],
                "median_ms": statistics.median(times[name]),
                "max_ms": max(times[name]),
                "min_ms": min(times[name]),
                "all_ms": times[name],
                **shapes[name],
            }
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.service metrics")
    parser.add_argument("--data-root", type=Path, default=REPO_ROOT / "bench/.cache/service")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument(
        "--datasets",
        default="10x100000,1x1000000",
        help="comma-separated KEYSxSTEPS (each is one data directory, filled once)",
    )
    parser.add_argument("--fill-only", action="store_true")
    parser.add_argument("--write-sample-steps", type=int, default=1000)
    parser.add_argument(
        "--database-url",
        default=None,
        help="store the datasets in this database (postgresql+psycopg://...) instead of "
        "a SQLite file per data directory",
    )
    args = parser.parse_args(argv)
    url = args.database_url
    suffix = "" if url is None else "-postgresql"
    datasets = []
    for item in args.datasets.split(","):
        n_keys, n_steps = (int(x) for x in item.split("x"))
        data_dir = args.data_root / f"metrics-{n_keys}x{n_steps}{suffix}"
        print(f"filling {data_dir} (through RunStore.record_metrics)", flush=True)
        datasets.append((data_dir, fill(data_dir, n_keys, n_steps, url)))
    if args.fill_only:
        return {"datasets": [d for _, d in datasets]}
    results = []
    for data_dir, info in datasets:
        timing = query(data_dir, info["run_id"], info["n_keys"], args.requests, url)
        print(
            f"{info['n_keys']} keys x {info['n_steps']:,} steps: "
            + ", ".join(
                f"{k} median {v['median_ms']:.1f} ms max {v['max_ms']:.1f} ms"
                for k, v in timing.items()
            ),
            flush=True,
        )
        results.append({"dataset": info, "query": timing})
    writes = [durable_write_ms(k, args.write_sample_steps, url) for k in (10, 1)]
    for w in writes:
        print(
            f"durable write, {w['n_keys']} keys: "
            + ", ".join(f"{k} {v:.2f}" for k, v in w.items() if k.endswith("ms") or "ms_" in k)
        )
    return {
        "settings": {
            "requests": args.requests,
            "max_points": 1000,
            "step_spacing": STEP_SPACING,
            "datasets": args.datasets,
            "database": "sqlite" if url is None else "postgresql",
        },
        "results": results,
        "durable_write_ms_per_step": writes,
        "target_ms": 200,
        "pass": all(q["median_ms"] < 200 for r in results for q in r["query"].values()),
    }
