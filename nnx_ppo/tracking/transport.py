"""How a tracked run's reports reach the service without slowing training: a bounded
buffer and a background sender.

The training thread only appends to the buffer (``put``). When it is full, ``put`` waits
at most ``put_timeout_s`` for room, then drops the report and counts it: a full buffer
never blocks training for longer than that, and nothing is dropped silently (the next
batch carries a ``log`` line with the count, and the next metrics the value
``tracking/dropped_reports``). The sender thread takes the buffered reports in order and
posts them as batches with a ``seq`` (stored once however often they are retried);
checkpoint and video files are uploaded before the report that announces them. Requests
are retried across network blips and service restarts (``ReportClient``). A heartbeat
thread keeps the run from being marked ``crashed`` and brings back whether it was
cancelled in the dashboard.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnx_ppo.tracking.http import ReportClient, ReportRefused, RunEnded, TrackingError

DROPPED_METRIC = "tracking/dropped_reports"


@dataclass(frozen=True)
class Upload:
    """A file uploaded to ``route`` before ``announce`` (its batch item) is sent; the file
    is deleted once uploaded when ``owned``."""

    route: str
    file: Path
    announce: dict[str, Any]
    owned: bool = True


Entry = dict[str, Any] | Upload
"""A batch item (``{"type": "metrics", ...}``, see ``server.store.run_events``) or an
upload."""


class Transport:
    """The buffer, the sender and the heartbeat of one online tracked run (module doc)."""

    def __init__(
        self,
        client: ReportClient,
        *,
        capacity: int = 10_000,
        put_timeout_s: float = 0.05,
        heartbeat_s: float = 5.0,
        batch_items: int = 1_000,
    ):
        if capacity < 1 or batch_items < 1:
            raise ValueError(f"capacity ({capacity}) and batch_items ({batch_items}) must be >= 1")
        self.client = client
        self.capacity = capacity
        self.put_timeout_s = put_timeout_s
        self.batch_items = batch_items
        self.dropped = 0
        """Reports that did not fit the buffer (or came after the run ended)."""
        self.cancel_requested = False
        self.ended: TrackingError | None = None
        """Why the sender stopped early (the run ended on the service, retries ran out)."""
        self._dropped_reported = 0
        self._reporting = 0
        self._buffer: deque[Entry] = deque()
        self._in_flight = 0
        self._seq = 0
        self._closing = False
        self._cond = threading.Condition()
        self._done = threading.Event()
        self._sender = threading.Thread(target=self._send_forever, daemon=True, name="tracking")
        self._beat = threading.Thread(
            target=self._beat_forever, args=(heartbeat_s,), daemon=True, name="tracking-beat"
        )
        self._sender.start()
        self._beat.start()

    # -- the training thread's side -----------------------------------------------------

    def put(self, entry: Entry) -> bool:
        """Buffers ``entry``; False (and counted in ``dropped``) when it did not fit within
        ``put_timeout_s`` or the run has ended."""
        with self._cond:
            deadline = time.monotonic() + self.put_timeout_s
            while self.ended is None and len(self._buffer) >= self.capacity:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            if self.ended is not None or len(self._buffer) >= self.capacity:
                self.dropped += 1
                if isinstance(entry, Upload) and entry.owned:
                    entry.file.unlink(missing_ok=True)
                return False
            self._buffer.append(entry)
            self._cond.notify_all()
            return True

    def pending(self) -> int:
        """Reports buffered or being sent."""
        with self._cond:
            return len(self._buffer) + self._in_flight

    def flush(self, timeout_s: float) -> bool:
        """Waits up to ``timeout_s`` until everything buffered is stored; whether it was."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self.ended is None and (self._buffer or self._in_flight):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return self.ended is None

    def close(self, timeout_s: float) -> int:
        """Flushes (up to ``timeout_s``) and stops the threads; returns how many reports
        were never delivered (dropped, or still buffered)."""
        self.flush(timeout_s)
        with self._cond:
            self._closing = True
            undelivered = self.dropped + len(self._buffer) + self._in_flight
            self._cond.notify_all()
        self._done.set()
        self._sender.join(timeout=1.0)
        self._beat.join(timeout=1.0)
        if not self._sender.is_alive():  # else still retrying: left to end with the process
            self.client.close()
        return undelivered

    # -- the sender thread --------------------------------------------------------------

    def _take(self) -> list[Entry] | None:
        """The next batch's entries (an upload goes alone), None when closing."""
        with self._cond:
            while not self._buffer and not self._closing:
                self._cond.wait()
            if self._closing:
                return None
            if isinstance(self._buffer[0], Upload):
                entries: list[Entry] = [self._buffer.popleft()]
            else:
                entries = []
                while (
                    self._buffer
                    and len(entries) < self.batch_items
                    and not isinstance(self._buffer[0], Upload)
                ):
                    entries.append(self._buffer.popleft())
            self._in_flight = len(entries)
            self._cond.notify_all()  # room for a waiting put
            return entries

    def _send_forever(self) -> None:
        while (entries := self._take()) is not None:
            try:
                self._send(entries)
            except ReportRefused:  # a malformed report: the others still go
                with self._cond:
                    self.dropped += len(entries)
            except TrackingError as error:  # the run ended there, or retries ran out
                self._end(error)
                return
            finally:
                with self._cond:
                    self._in_flight = 0
                    self._cond.notify_all()

    def _send(self, entries: list[Entry]) -> None:
        items: list[dict[str, Any]] = []
        for entry in entries:
            if isinstance(entry, Upload):
                self.client.upload(entry.route, entry.file)
                if entry.owned:
                    entry.file.unlink(missing_ok=True)
                items.append(entry.announce)
            else:
                items.append(entry)
        items = self._with_dropped_count(items)
        self._seq += 1
        self.client.send_batch(self._seq, items)
        with self._cond:
            self._dropped_reported = max(self._dropped_reported, self._reporting)

    def _with_dropped_count(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``items`` with the count of dropped reports when it grew since the last batch."""
        with self._cond:
            self._reporting = dropped = self.dropped
        if dropped <= self._dropped_reported:
            return items
        line = (
            f"tracking: {dropped} report(s) did not fit the buffer ({self.capacity} reports) "
            "and were dropped"
        )
        out = [*items, {"type": "log", "line": line}]
        for i in range(len(out) - 1, -1, -1):
            if out[i].get("type") == "metrics":
                values = {**out[i]["values"], DROPPED_METRIC: float(dropped)}
                out[i] = {**out[i], "values": values}
                break
        return out

    def _end(self, error: TrackingError) -> None:
        with self._cond:
            self.ended = error
            self.dropped += len(self._buffer)
            self._buffer.clear()
            self._cond.notify_all()

    # -- the heartbeat thread -----------------------------------------------------------

    def _beat_forever(self, every_s: float) -> None:
        while not self._done.is_set():
            try:
                answer = self.client.heartbeat(timeout_s=max(every_s * 2, 5.0))
            except RunEnded as error:
                self._end(error)
                return
            if answer is not None:
                self.cancel_requested = answer
            self._done.wait(every_s)
