"""Fan-out of run events to websocket clients.

One poller task watches the ``last_seq`` of every run that has followers (a single query
every ``POLL_S``), reads each new event once from the database and wakes that run's
followers, who take events from a per-run buffer of recent events. The first poll of a
newly followed run fills the buffer with its last ``BUFFER`` events, so clients that
connect together catch up from memory: none reads the database. A follower that is behind
the buffer (a slow client, or one replaying a long run from an old ``seq``) reads the
database, sharing the query with every follower at the same ``seq`` (``SharedReads``), and
so does the lookup of the run when a client connects. Events only ever come from the
database: a metric is sent only once it is durable.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from server.api.shared_reads import SharedReads
from server.store.models import RunRow
from server.store.run_store import RunStore

log = logging.getLogger("nnx_ppo.server")

POLL_S = 0.05
BUFFER = 2000
READ_LIMIT = 500
"""Events a follower behind the buffer reads from the database at a time."""

Encoded = tuple[dict[str, Any], str]
"""An event and its JSON text, serialized once for every follower."""


def encode_events(events: list[dict[str, Any]]) -> list[Encoded]:
    return [(event, json.dumps(event, separators=(",", ":"))) for event in events]


@dataclass
class _Followed:
    followers: int = 0
    seq: int | None = None
    """The newest event read into ``events``; None until the first poll."""
    events: deque[Encoded] = field(default_factory=lambda: deque(maxlen=BUFFER))
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class StreamHub:
    def __init__(self, store: RunStore):
        self.store = store
        self._runs: dict[str, _Followed] = {}
        self._task: asyncio.Task[None] | None = None
        self._reads = SharedReads()

    def start(self) -> None:
        self._task = asyncio.create_task(self._poll_forever(), name="stream-hub")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def follow(self, run_id: str) -> None:
        self._runs.setdefault(run_id, _Followed()).followers += 1

    def unfollow(self, run_id: str) -> None:
        followed = self._runs.get(run_id)
        if followed is not None:
            followed.followers -= 1
            if followed.followers <= 0:
                del self._runs[run_id]

    async def run(self, run_id: str) -> RunRow:
        """The run's row (``RunNotFound``); concurrent lookups of a run share one query."""
        return await self._reads.read(("run", run_id), functools.partial(self.store.get, run_id))

    async def next_events(self, run_id: str, seq: int, timeout: float) -> list[Encoded]:
        """The run's events after ``seq`` with their JSON, for a follower of the run: from
        the buffer, or from the database when the buffer does not reach back to ``seq + 1``
        (up to ``READ_LIMIT``). When there are none yet, waits up to ``timeout`` for the
        next poll and returns ``[]``: call again."""
        events = self._buffered_after(run_id, seq)
        if events is None:
            return await self._reads.read(
                ("events", run_id, seq),
                functools.partial(self._read_encoded, run_id, seq, READ_LIMIT),
            )
        if not events:
            await self._wait(run_id, seq, timeout)
        return events

    def _buffered_after(self, run_id: str, seq: int) -> list[Encoded] | None:
        """Events after ``seq`` from the buffer; ``[]`` until the run's first poll; None
        when the buffer does not reach back to ``seq + 1`` (read the database instead)."""
        followed = self._runs.get(run_id)
        if followed is None:
            return None
        if followed.seq is None or seq >= followed.seq:
            return []
        events = followed.events
        if not events or events[0][0]["seq"] > seq + 1:
            return None
        start = seq + 1 - events[0][0]["seq"]  # seqs are contiguous
        return list(itertools.islice(events, start, None))

    async def _wait(self, run_id: str, seq: int, timeout: float) -> None:
        """Returns once the run has an event after ``seq`` (or after ``timeout``)."""
        followed = self._runs.get(run_id)
        if followed is None or (followed.seq is not None and followed.seq > seq):
            return
        event = followed.changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    async def _poll_forever(self) -> None:
        while True:
            try:
                await self._poll()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep streaming through a transient database error
                log.exception("stream hub poll failed")
            await asyncio.sleep(POLL_S)

    async def _poll(self) -> None:
        if not self._runs:
            return
        ids = list(self._runs)
        latest = await run_in_threadpool(self._last_seqs, ids)
        for run_id, last_seq in latest.items():
            followed = self._runs.get(run_id)
            if followed is None:
                continue
            if followed.seq is None:  # newly followed: its last events, for its clients
                start = max(0, last_seq - BUFFER)
            elif last_seq > followed.seq:
                start = followed.seq
            else:
                continue
            while start < last_seq:
                events = await run_in_threadpool(self._read_encoded, run_id, start, 1000)
                if not events:
                    break
                followed.events.extend(events)
                start = events[-1][0]["seq"]
            followed.seq = start
            self._notify(followed)

    @staticmethod
    def _notify(followed: _Followed) -> None:
        followed.changed.set()
        followed.changed = asyncio.Event()

    def _read_encoded(self, run_id: str, after_seq: int, limit: int) -> list[Encoded]:
        return encode_events(self.store.events_after(run_id, after_seq, limit))

    def _last_seqs(self, ids: list[str]) -> dict[str, int]:
        with self.store.sessions() as session:
            rows = session.execute(select(RunRow.id, RunRow.last_seq).where(RunRow.id.in_(ids)))
            return {run_id: seq for run_id, seq in rows}
