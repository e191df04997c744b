"""Fan-out of the service-wide events (``service_events``) to websocket clients.

Like ``stream_hub`` for one sequence: while anyone follows, one poller task reads the
newest seq every ``POLL_S``, reads each new event once from the database into a buffer of
recent events, and wakes the followers. A follower behind the buffer reads the database
itself. Events only ever come from the database, so a replay is identical to live.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque

from starlette.concurrency import run_in_threadpool

from server.api.stream_hub import Encoded, encode_events
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

    def buffered_after(self, seq: int) -> list[Encoded] | None:
        """Events after ``seq`` from the buffer; None when it does not reach back to
        ``seq + 1`` (read the database instead)."""
        if self.seq is None:
            return None
        if seq >= self.seq:
            return []
        if not self.events or self.events[0][0]["seq"] > seq + 1:
            return None
        start = seq + 1 - self.events[0][0]["seq"]  # seqs are contiguous
        return list(itertools.islice(self.events, start, None))

    async def wait(self, seq: int, timeout: float) -> None:
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
        if self.seq is None:  # newly followed: clients catch up from the database
            self.seq = newest
            self._notify()
            return
        start = self.seq
        while start < newest:
            events = await run_in_threadpool(self.store.service_events_after, start, 1000)
            if not events or events[0]["seq"] != start + 1:
                self.events.clear()  # pruned past the buffer: followers read the database
                start = newest
                break
            self.events.extend(encode_events(events))
            start = events[-1]["seq"]
        if start != self.seq:
            self.seq = start
            self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
