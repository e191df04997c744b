"""100 websocket clients following one live run (or the service's events): every client
sees every event once, in order, and the database reads do not grow with the clients (the
hub reads each event once; clients that connect together share the lookup and catch-up).

The stream's router runs in a real uvicorn server on a real SQLite file; the statements
are counted on the server's engine. Before the hub served the catch-up, each client read
the run's events itself when it connected: 100 clients were 100+ reads of ``events`` in
the thread pool at one moment, and the API's requests queued behind them."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy import event
from websockets.asyncio.client import connect

from server.api import events, stream
from server.api.deps import Services
from server.api.events_hub import ServiceEventsHub
from server.api.stream_hub import StreamHub
from server.settings import Settings
from server.spec.checker import EnvCatalogue, SpecChecker
from server.store.db import make_engine, make_sessionmaker, migrate
from server.store.run_store import RunStore
from tests.service_harness import free_port

CLIENTS = 100
BEFORE = 40
"""Log events written before the clients connect (after ``queued`` and ``running``)."""
DURING = 20
"""Log events written while they follow, before the run finishes."""


class Served:
    """The stream router in a uvicorn server of its own; counts the server's reads."""

    def __init__(self, data_dir: Path):
        self.data_dir = data_dir
        self.url = f"sqlite:///{data_dir / 'nnx_ppo.db'}"
        migrate(self.url)
        self.port = free_port()
        self.reads = {"events": 0, "service_events": 0}
        self._counting = False
        settings = Settings(data_dir=data_dir, api_token="fanout-test-token")
        engine = make_engine(self.url)
        event.listen(engine, "before_cursor_execute", self._count)
        store = RunStore(make_sessionmaker(engine), data_dir / "runs")
        services = Services(
            settings,
            store,
            SpecChecker(),  # never started: the stream does not check specs
            EnvCatalogue(data_dir, include_playground=False),
            StreamHub(store),
            ServiceEventsHub(store),
        )

        @asynccontextmanager
        async def lifespan(app: FastAPI) -> AsyncIterator[None]:
            app.state.services = services
            services.hub.start()
            services.events.start()
            yield
            await services.hub.stop()
            await services.events.stop()
            engine.dispose()

        app = FastAPI(lifespan=lifespan)
        app.include_router(stream.router, prefix="/api")
        app.include_router(events.router, prefix="/api")
        config = uvicorn.Config(
            app, port=self.port, log_level="warning", ws_per_message_deflate=False
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)

    def _count(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        """Counts reads of events (``ORDER BY seq``; not the newest seq's ``max``)."""
        if self._counting and statement.lstrip().startswith("SELECT") and "ORDER BY" in statement:
            for table in self.reads:
                if f"FROM {table} " in statement:
                    self.reads[table] += 1

    def count_from_now(self) -> None:
        self.reads = dict.fromkeys(self.reads, 0)
        self._counting = True

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with Served(tmp_path) as s:
        yield s


async def _follow(port: int, run_id: str, ready: asyncio.Event, seen: list[int]) -> int | None:
    url = f"ws://127.0.0.1:{port}/api/runs/{run_id}/stream"
    async with connect(url, open_timeout=60) as ws:
        async for message in ws:
            seen.append(json.loads(message)["seq"])
            if seen[-1] == 2 + BEFORE:
                ready.set()
        return ws.close_code


def test_100_followers_of_a_live_run_read_each_event_once(served: Served) -> None:
    writer = RunStore(make_sessionmaker(make_engine(served.url)), served.data_dir / "runs")
    run = writer.create({}, kind="ppo", name="fanout", tags=[], notes="", total_steps=1)
    writer.transition(run.id, "start")
    for i in range(BEFORE):
        writer.record_log(run.id, f"before {i}")

    async def follow_all() -> tuple[list[list[int]], list[int | None]]:
        seen: list[list[int]] = [[] for _ in range(CLIENTS)]
        ready = [asyncio.Event() for _ in range(CLIENTS)]
        served.count_from_now()
        clients = [
            asyncio.create_task(_follow(served.port, run.id, ready[i], seen[i]))
            for i in range(CLIENTS)
        ]
        async with asyncio.timeout(120):
            await asyncio.gather(*(r.wait() for r in ready))  # every client caught up
            for i in range(DURING):
                await asyncio.to_thread(writer.record_log, run.id, f"during {i}")
            await asyncio.to_thread(writer.transition, run.id, "finish")
            codes = await asyncio.gather(*clients)
        return seen, codes

    seen, codes = asyncio.run(follow_all())
    last = 2 + BEFORE + DURING + 1  # queued, running, the logs, succeeded
    for client in seen:
        assert client == list(range(1, last + 1))
    assert codes == [1000] * CLIENTS
    # The hub's catch-up read and one per poll that found new events (at most one per
    # event written meanwhile); before, each client read the events when it connected.
    assert served.reads["events"] <= 2 + DURING + 1, served.reads


async def _follow_service(port: int, ready: asyncio.Event, seen: list[int], last: int) -> None:
    async with connect(f"ws://127.0.0.1:{port}/api/events", open_timeout=60) as ws:
        async for message in ws:
            seen.append(json.loads(message)["seq"])
            if len(seen) == BEFORE:
                ready.set()
            if seen[-1] == last:
                return


def test_100_followers_of_the_service_events_read_each_event_once(served: Served) -> None:
    writer = RunStore(make_sessionmaker(make_engine(served.url)), served.data_dir / "runs")

    def create_runs(n: int) -> None:
        for i in range(n):
            writer.create({}, kind="ppo", name=f"r{i}", tags=[], notes="", total_steps=1)

    create_runs(BEFORE)  # one ``created`` event each

    async def follow_all() -> list[list[int]]:
        seen: list[list[int]] = [[] for _ in range(CLIENTS)]
        ready = [asyncio.Event() for _ in range(CLIENTS)]
        served.count_from_now()
        last = BEFORE + DURING
        clients = [
            asyncio.create_task(_follow_service(served.port, ready[i], seen[i], last))
            for i in range(CLIENTS)
        ]
        async with asyncio.timeout(120):
            await asyncio.gather(*(r.wait() for r in ready))
            await asyncio.to_thread(create_runs, DURING)
            await asyncio.gather(*clients)
        return seen

    for client in asyncio.run(follow_all()):
        assert client == list(range(1, BEFORE + DURING + 1))
    assert served.reads["service_events"] <= 1 + DURING, served.reads
