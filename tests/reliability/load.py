"""The load driver shared by ``test_load.py`` and ``bench/reliability_load.py``: runs
training on a live service while websocket clients follow them and pollers hit the API."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import statistics
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
from websockets.asyncio.client import connect

from tests.service_harness import TOKEN, Service


@dataclass
class Follower:
    run_id: str
    seqs: list[int] = field(default_factory=list)
    last: dict[str, Any] | None = None
    close_code: int | None = None
    error: str | None = None


@dataclass
class LoadResult:
    followers: list[Follower]
    latencies: dict[str, list[float]]
    errors: list[str]

    def p(self, q: float) -> float:
        return _quantile(sorted(x for xs in self.latencies.values() for x in xs), q)

    def figures(self) -> dict[str, Any]:
        every = [x for xs in self.latencies.values() for x in xs]
        return {
            "api_requests": len(every),
            "api_p50_ms": round(1000 * self.p(0.50), 1),
            "api_p99_ms": round(1000 * self.p(0.99), 1),
            "api_max_ms": round(1000 * max(every), 1) if every else None,
            "api_mean_ms": round(1000 * statistics.fmean(every), 1) if every else None,
            "ws_clients": len(self.followers),
            "ws_events": sum(len(f.seqs) for f in self.followers),
            "api_p99_ms_by_path": {
                path: round(1000 * _quantile(sorted(xs), 0.99), 1)
                for path, xs in sorted(self.latencies.items())
            },
        }


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _follow(port: int, follower: Follower, timeout: float) -> None:
    url = f"ws://127.0.0.1:{port}/api/runs/{follower.run_id}/stream"
    try:
        async with connect(
            url, additional_headers={"Authorization": f"Bearer {TOKEN}"}, open_timeout=60
        ) as ws:
            try:
                async with asyncio.timeout(timeout):
                    async for message in ws:
                        event = json.loads(message)
                        follower.seqs.append(event["seq"])
                        follower.last = event
            except TimeoutError:
                follower.error = "timed out"
            follower.close_code = ws.close_code
    except Exception as error:  # recorded, and asserted on
        follower.error = f"{type(error).__name__}: {error}"


def _poll(svc: Service, run_ids: list[str], stop: threading.Event, result: LoadResult) -> None:
    paths = [
        "/api/runs",
        "/api/health",
        *(f"/api/runs/{r}" for r in run_ids),
        *(f"/api/runs/{r}/metrics?max_points=200" for r in run_ids),
        *(f"/api/runs/{r}/checkpoints" for r in run_ids),
    ]
    with httpx.Client(
        base_url=svc.url, timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as client:
        i = 0
        while not stop.is_set():
            path = paths[i % len(paths)]
            i += 1
            started = time.perf_counter()
            try:
                response = client.get(path)
            except httpx.HTTPError as error:
                result.errors.append(f"GET {path}: {error!r}")
                continue
            result.latencies.setdefault(path.split("?")[0], []).append(
                time.perf_counter() - started
            )
            if response.status_code != 200:
                result.errors.append(f"GET {path}: {response.status_code} {response.text[:200]}")
            time.sleep(0.02)


def _follow_all(port: int, followers: list[Follower], timeout: float) -> list[Follower]:
    async def follow_all() -> None:
        await asyncio.gather(*(_follow(port, f, timeout) for f in followers))

    asyncio.run(follow_all())
    return followers


def drive(
    svc: Service,
    run_ids: list[str],
    clients: int,
    pollers: int = 4,
    timeout: float = 300,
) -> LoadResult:
    """Follows ``run_ids`` with ``clients`` websocket clients (spread evenly) and
    ``pollers`` API pollers until every run has ended (the server closes the streams).

    The followers run in a process of their own: decoding ~50k events in the pollers'
    process held its GIL, and the pollers measured their own wait as the API's latency."""
    followers = [Follower(run_ids[i % len(run_ids)]) for i in range(clients)]
    result = LoadResult(followers, {}, [])
    stop = threading.Event()
    threads = [
        threading.Thread(target=_poll, args=(svc, run_ids, stop, result), daemon=True)
        for _ in range(pollers)
    ]
    for thread in threads:
        thread.start()
    try:
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(1, mp_context=spawn) as pool:
            result.followers = pool.submit(_follow_all, svc.port, followers, timeout).result()
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    return result
