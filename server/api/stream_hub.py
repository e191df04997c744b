"""Fan-out of run events to websocket clients.

One poller task watches the ``last_seq`` of every run that has followers (a single query
every ``POLL_S``), reads each new event once from the database and wakes that run's
followers, who take events from a per-run buffer of recent events. A follower that is
behind the buffer (a slow client, or one replaying from an old ``seq``) reads the database
itself. Events only ever come from the database: a metric is sent only once it is durable.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from server.store.models import RunRow
from server.store.run_store import RunStore

log = logging.getLogger("nnx_ppo.server")

POLL_S = 0.05
BUFFER = 2000

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

    def buffered_after(self, run_id: str, seq: int) -> list[Encoded] | None:
        """Events after ``seq`` from the buffer, with their JSON; None when the buffer does
        not reach back to ``seq + 1`` (read the database instead)."""
        followed = self._runs.get(run_id)
        if followed is None or followed.seq is None:
            return None
        events = followed.events
        if seq >= followed.seq:
            return []
        if not events or events[0][0]["seq"] > seq + 1:
            return None
        start = seq + 1 - events[0][0]["seq"]  # seqs are contiguous
        return list(itertools.islice(events, start, None))

    async def wait(self, run_id: str, seq: int, timeout: float) -> None:
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
            if followed.seq is None:  # newly followed: its clients catch up from the database
                followed.seq = last_seq
                self._notify(followed)
                continue
            if last_seq <= followed.seq:
                continue
            start = followed.seq
            while start < last_seq:
                events = await run_in_threadpool(self.store.events_after, run_id, start, 1000)
                if not events:
                    break
                followed.events.extend(encode_events(events))
                start = events[-1]["seq"]
            followed.seq = start
            self._notify(followed)

    @staticmethod
    def _notify(followed: _Followed) -> None:
        followed.changed.set()
        followed.changed = asyncio.Event()

    def _last_seqs(self, ids: list[str]) -> dict[str, int]:
        with self.store.sessions() as session:
            rows = session.execute(select(RunRow.id, RunRow.last_seq).where(RunRow.id.in_(ids)))
            return {run_id: seq for run_id, seq in rows}
