"""Fan-out of the service-wide events (``service_events``) to websocket clients.

Like ``stream_hub`` for one sequence: while anyone follows, one poller task reads the
newest seq every ``POLL_S``, reads each new event once from the database into a buffer of
recent events (the first poll fills it with the last ``BUFFER``), and wakes the followers.
A follower behind the buffer reads the database, sharing the query with the followers at
the same seq (``SharedReads``). Events only ever come from the database, so a replay is
identical to live.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from collections import deque

from starlette.concurrency import run_in_threadpool

from server.api.shared_reads import SharedReads
from server.api.stream_hub import READ_LIMIT, Encoded, encode_events
from server.store.run_store import RunStore

log = logging.getLogger("nnx_ppo.server")

POLL_S = 0.1
BUFFER = 2000


class ServiceEventsHub:
    def __init__(self, store: RunStore):
        self.store = store
        self.followers = 0
        self.seq: int | None = None
        """The newest event read into ``events``; None while nobody follows."""
        self.events: deque[Encoded] = deque(maxlen=BUFFER)
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._reads = SharedReads()

    def start(self) -> None:
        self._task = asyncio.create_task(self._poll_forever(), name="events-hub")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def follow(self) -> None:
        self.followers += 1

    def unfollow(self) -> None:
        self.followers -= 1
        if self.followers <= 0:
            self.followers, self.seq = 0, None
            self.events.clear()

    async def newest_seq(self) -> int:
        """The newest event's seq in the database; concurrent calls share one query."""
        return await self._reads.read("newest", self.store.service_events_seq)

    async def next_events(self, seq: int, timeout: float) -> list[Encoded]:
        """Events after ``seq`` with their JSON: from the buffer, or from the database when
        the buffer does not reach back to ``seq + 1`` (the first may then be later than
        ``seq + 1``: pruned). When there are none yet, waits up to ``timeout`` for the next
        poll and returns ``[]``: call again."""
        events = self._buffered_after(seq)
        if events is None:
            read = functools.partial(self._read_encoded, seq, READ_LIMIT)
            return await self._reads.read(("events", seq), read)
        if not events:
            await self._wait(seq, timeout)
        return events

    def _buffered_after(self, seq: int) -> list[Encoded] | None:
        """Events after ``seq`` from the buffer; ``[]`` until the first poll; None when it
        does not reach back to ``seq + 1`` (read the database instead)."""
        if self.seq is None or seq >= self.seq:
            return []
        if not self.events or self.events[0][0]["seq"] > seq + 1:
            return None
        start = seq + 1 - self.events[0][0]["seq"]  # seqs are contiguous
        return list(itertools.islice(self.events, start, None))

    async def _wait(self, seq: int, timeout: float) -> None:
        """Returns once there is an event after ``seq`` (or after ``timeout``)."""
        if self.seq is not None and self.seq > seq:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    async def _poll_forever(self) -> None:
        while True:
            try:
                if self.followers:
                    await self._poll()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep streaming through a transient database error
                log.exception("events hub poll failed")
            await asyncio.sleep(POLL_S)

    async def _poll(self) -> None:
        newest = await run_in_threadpool(self.store.service_events_seq)
        first = self.seq is None
        start = max(0, newest - BUFFER) if self.seq is None else self.seq
        while start < newest:
            events = await run_in_threadpool(self._read_encoded, start, 1000)
            contiguous = events and (events[0][0]["seq"] == start + 1 or not self.events)
            if not contiguous:
                self.events.clear()  # pruned past the buffer: followers read the database
                start = newest
                break
            self.events.extend(events)
            start = events[-1][0]["seq"]
        if first or start != self.seq:
            self.seq = start
            self._notify()

    def _read_encoded(self, after_seq: int, limit: int) -> list[Encoded]:
        return encode_events(self.store.service_events_after(after_seq, limit))

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
