"""Numbered event streams on websockets: one hub design and one follow loop for a run's
events, a sweep's events and the service-wide events.

A stream is a key (a run's id, a sweep's id, ``SERVICE``) whose events are numbered by a
``seq`` that grows by one per event. A ``SeqHub`` is told two things about its streams:
``latest`` (the newest seq of each of some keys, in one query) and ``events_after`` (a
key's events after a seq, oldest first). While a key has followers, one poller task asks
``latest`` for every followed key every ``poll_s``, reads each new event once from the
database into the key's buffer of recent events, and wakes the key's followers, who take
events from the buffer. The first poll of a newly followed key fills the buffer with its
last ``buffer`` events, so clients that connect together catch up from memory: none reads
the database. A follower behind the buffer (a slow client, or one replaying from an old
``seq``) reads the database, sharing the query with every follower at the same seq
(``SharedReads``). Events only ever come from the database: an event is sent only once it
is durable, and a replay is identical to what was sent live.

``follow`` is the websocket side: every event after the client's ``after_seq``, in order,
then live ones, until a final event (closed normally, 1000), the client leaves, or the
events after the client's seq are gone (pruned: closed with ``RESYNC_CODE``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect
from starlette.concurrency import run_in_threadpool

from server.api.shared_reads import SharedReads

log = logging.getLogger("nnx_ppo.server")

BUFFER = 2000
"""Recent events a hub keeps per followed key."""
READ_LIMIT = 500
"""Events a follower behind the buffer reads from the database at a time."""
POLL_READ = 1000
"""Events the poller reads at a time."""
SEND_TIMEOUT_S = 10.0
"""A client that does not take an event within this long is dropped."""
MAX_CLIENT_MESSAGES_PER_S = 20
YIELD_EVERY = 50
"""A client catching up yields the event loop after this many events sent."""
RESYNC_CODE = 4410
"""Close code: the events after the client's seq are gone; it should reload and follow
again from its fresh state's seq."""

Event = dict[str, Any]
Encoded = tuple[Event, str]
"""An event and its JSON text, serialized once for every follower."""
Latest = Callable[[list[str]], Mapping[str, int]]
"""The newest seq of each of these keys that exists (one query)."""
EventsAfter = Callable[[str, int, int], list[Event]]
"""``(key, after_seq, limit)``: the key's events with seq > after_seq, oldest first."""


def encode_events(events: list[Event]) -> list[Encoded]:
    return [(event, json.dumps(event, separators=(",", ":"))) for event in events]


@dataclass
class _Followed:
    events: deque[Encoded]
    """The key's recent events, contiguous, at most the hub's ``buffer``."""
    followers: int = 0
    seq: int | None = None
    """The newest event read into ``events``; None until the first poll."""
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class SeqHub:
    """Fan-out of numbered event streams to their followers (see the module doc)."""

    def __init__(
        self,
        name: str,
        *,
        latest: Latest,
        events_after: EventsAfter,
        poll_s: float,
        buffer: int = BUFFER,
    ):
        self.name = name
        self.poll_s = poll_s
        self.buffer = buffer
        self.reads = SharedReads()
        """Concurrent identical reads share one query (also for the hubs' own lookups)."""
        self._latest = latest
        self._events_after = events_after
        self._followed: dict[str, _Followed] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._poll_forever(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def follow(self, key: str) -> None:
        followed = self._followed.get(key)
        if followed is None:
            followed = self._followed[key] = _Followed(deque(maxlen=self.buffer))
        followed.followers += 1

    def unfollow(self, key: str) -> None:
        followed = self._followed.get(key)
        if followed is not None:
            followed.followers -= 1
            if followed.followers <= 0:
                del self._followed[key]

    async def latest_seq(self, key: str) -> int | None:
        """The key's newest seq in the database (None: no such key); concurrent calls
        share one query."""
        latest = await self.reads.read(("latest", key), functools.partial(self._latest, [key]))
        return latest.get(key)

    async def next_events(self, key: str, seq: int, timeout: float) -> list[Encoded]:
        """The key's events after ``seq`` with their JSON, for a follower of the key: from
        the buffer, or from the database when the buffer does not reach back to ``seq + 1``
        (up to ``READ_LIMIT``; the first is later than ``seq + 1`` when those were pruned).
        When there are none yet, waits up to ``timeout`` for the next poll and returns
        ``[]``: call again."""
        events = self._buffered_after(key, seq)
        if events is None:
            read = functools.partial(self._read_encoded, key, seq, READ_LIMIT)
            events = await self.reads.read(("events", key, seq), read)
            if not events:  # gone since the poll (deleted): do not spin on the database
                await asyncio.sleep(min(timeout, self.poll_s))
            return events
        if not events:
            await self._wait(key, seq, timeout)
        return events

    def _buffered_after(self, key: str, seq: int) -> list[Encoded] | None:
        """Events after ``seq`` from the buffer; ``[]`` until the key's first poll; None
        when the buffer does not reach back to ``seq + 1`` (read the database instead)."""
        followed = self._followed.get(key)
        if followed is None:
            return None
        if followed.seq is None or seq >= followed.seq:
            return []
        events = followed.events
        if not events or events[0][0]["seq"] > seq + 1:
            return None
        start = seq + 1 - events[0][0]["seq"]  # seqs in the buffer are contiguous
        return list(itertools.islice(events, start, None))

    async def _wait(self, key: str, seq: int, timeout: float) -> None:
        """Returns once the key has an event after ``seq`` (or after ``timeout``)."""
        followed = self._followed.get(key)
        if followed is None or (followed.seq is not None and followed.seq > seq):
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(followed.changed.wait(), timeout)

    async def _poll_forever(self) -> None:
        while True:
            try:
                await self.poll()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep streaming through a transient database error
                log.exception("%s poll failed", self.name)
            await asyncio.sleep(self.poll_s)

    async def poll(self) -> None:
        """One poll: reads the new events of every followed key and wakes its followers."""
        if not self._followed:
            return
        latest = await run_in_threadpool(self._latest, list(self._followed))
        for key, newest in latest.items():
            followed = self._followed.get(key)
            if followed is not None:
                await self._catch_up(key, followed, newest)

    async def _catch_up(self, key: str, followed: _Followed, newest: int) -> None:
        """Reads the key's events up to ``newest`` into its buffer (on its first poll, the
        last ``buffer`` of them) and wakes its followers. When the events after the buffer
        were pruned it empties the buffer: its followers read the database, and find the
        gap."""
        first = followed.seq is None
        start = max(0, newest - self.buffer) if followed.seq is None else followed.seq
        while start < newest:
            events = await run_in_threadpool(self._read_encoded, key, start, POLL_READ)
            if not events or (followed.events and events[0][0]["seq"] != start + 1):
                followed.events.clear()
                start = newest
                break
            followed.events.extend(events)
            start = events[-1][0]["seq"]
        if first or start != followed.seq:
            followed.seq = start
            followed.changed.set()
            followed.changed = asyncio.Event()

    def _read_encoded(self, key: str, after_seq: int, limit: int) -> list[Encoded]:
        return encode_events(self._events_after(key, after_seq, limit))


def never(_event: Event) -> bool:
    return False


async def follow(
    websocket: WebSocket,
    hub: SeqHub,
    key: str,
    after_seq: int,
    *,
    final: Callable[[Event], bool] = never,
) -> None:
    """Sends the accepted ``websocket`` every event of ``key`` after ``after_seq`` in order,
    then live ones. Closes it normally (1000) after a ``final`` event, and with
    ``RESYNC_CODE`` when the events after the seq it has reached were pruned; returns when
    the client leaves, floods, or does not take an event within ``SEND_TIMEOUT_S``."""
    hub.follow(key)
    reader = asyncio.create_task(drain_client(websocket))
    try:
        seq = after_seq
        while not reader.done():
            events = await hub.next_events(key, seq, timeout=1.0)
            if events and events[0][0]["seq"] != seq + 1:
                reason = f"events after seq {seq} were pruned"
                await websocket.close(code=RESYNC_CODE, reason=reason)
                return
            for i, (event, text) in enumerate(events, 1):
                async with asyncio.timeout(SEND_TIMEOUT_S):
                    await websocket.send_text(text)
                seq = event["seq"]
                if final(event):
                    await websocket.close(code=1000)
                    return
                if i % YIELD_EVERY == 0:
                    await asyncio.sleep(0)  # a send does not yield: let requests through
    except (WebSocketDisconnect, TimeoutError, RuntimeError):
        pass  # the client left, or was too slow to follow
    finally:
        hub.unfollow(key)
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader


async def drain_client(websocket: WebSocket) -> None:
    """Reads and discards what the client sends; returns (ending the stream) when it
    disconnects or floods (more than ``MAX_CLIENT_MESSAGES_PER_S`` messages a second)."""
    window_start, count = time.monotonic(), 0
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            count += 1
            now = time.monotonic()
            if now - window_start > 1.0:
                window_start, count = now, 1
            if count > MAX_CLIENT_MESSAGES_PER_S:
                await websocket.close(code=1008, reason="too many messages")
                return
    except (WebSocketDisconnect, RuntimeError):
        return
