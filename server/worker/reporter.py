"""The narrow interface through which a run process reports, wherever it runs: store
metrics, store artifacts, write log lines, ask whether it should stop, and read the specs
and checkpoints it starts from (``Reporter``). ``RunReporter`` is the local path, straight
to the database and the run's directory; ``server.worker.http_reporter.HttpReporter`` is a
run process's on another node, over HTTP with its run token.

Writes go through one background thread, in order, so that training never waits for the
database: metrics that arrive while a transaction commits are stored together in the next
one. A write that fails (a full disk, say) is raised on the next report, and ``flush``
waits until everything reported is durable (or raises the failure).
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from server.settings import Settings
from server.store import artifacts
from server.store.db import make_engine, make_sessionmaker
from server.store.run_events import ReportItem
from server.store.run_store import RunStore

CANCEL_POLL_S = 0.5


class ReportFailed(Exception):
    """Storing a report failed; the message names the cause."""


class Reporter(Protocol):
    """What a run process reports through (see the module doc)."""

    run_id: str

    def metrics(self, step: int, values: Mapping[str, float]) -> None: ...
    def attach(self, values: Mapping[str, float]) -> None: ...
    def video(self, step: int, path: Path, episode_reward: float, episode_length: int) -> None:
        """A video written at ``path`` (in the run's ``videos/``)."""

    def checkpoint(self, checkpoint: artifacts.Checkpoint) -> None:
        """A complete checkpoint in the run's ``checkpoints/``."""

    def log(self, line: str) -> None: ...
    def phase(self, name: str, since: float) -> None:
        """The run entered phase ``name`` (``run_progress.PHASES``) at ``since`` (epoch s)."""

    def rewind(self, step: int) -> None:
        """The run trains from ``step`` (its start, or the checkpoint it resumes from):
        metrics stored after it are deleted (``server.store.metric_rewind``)."""

    def flush(self) -> None: ...
    def cancel_requested(self) -> bool: ...
    def run_spec(self, run_id: str) -> dict[str, Any]:
        """The spec of this run, or of a run its spec names (teacher, resume_from)."""

    def checkpoint_input(
        self, run_id: str, step: int | None, run_dir: Path
    ) -> artifacts.Checkpoint | None:
        """A checkpoint of this run or of one it names (the newest when ``step`` is None),
        present in ``run_dir`` (that run's directory as this process sees it)."""

    def close(self) -> None: ...


def checkpoint_public(run_id: str, checkpoint: artifacts.Checkpoint) -> dict[str, Any]:
    """A ``checkpoint`` event's payload."""
    return {
        "step": checkpoint.step,
        "size_bytes": checkpoint.size_bytes,
        "created_at": checkpoint.created_at,
        "url": f"/api/runs/{run_id}/checkpoints/{checkpoint.step}",
    }


class QueuedReporter:
    """The ordered background writer that both reporters share: reports queue as
    ``ReportItem``s (``server.store.run_events``), and ``_write`` stores the ones queued
    since the last write."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self._queue: queue.Queue[ReportItem] = queue.Queue()
        self._error: BaseException | None = None
        self._attached: dict[str, float] = {}
        self._attached_lock = threading.Lock()
        self._writer = threading.Thread(target=self._write_forever, daemon=True, name="reporter")
        self._writer.start()

    # -- reports (queued, in order) -----------------------------------------------------

    def metrics(self, step: int, values: Mapping[str, float]) -> None:
        """One step's metrics, with the newest ``attach``-ed values not yet reported."""
        with self._attached_lock:
            attached, self._attached = self._attached, {}
        self._put(ReportItem.metrics(step, time.time(), {**attached, **values}))

    def attach(self, values: Mapping[str, float]) -> None:
        """Values sampled beside training (``system/*``, from another thread), stored with
        the next step's metrics; a newer value of a key replaces an unreported one."""
        with self._attached_lock:
            self._attached.update(values)

    def video(self, step: int, path: Path, episode_reward: float, episode_length: int) -> None:
        self._put(ReportItem.video(step, path.name, episode_reward, episode_length))

    def checkpoint(self, checkpoint: artifacts.Checkpoint) -> None:
        self._put(ReportItem("checkpoint", checkpoint_public(self.run_id, checkpoint)))

    def log(self, line: str) -> None:
        """A line for the log file and the run's stream."""
        print(line, file=sys.stderr, flush=True)
        self._put(ReportItem("log", {"line": line}))

    def phase(self, name: str, since: float) -> None:
        """A ``phase`` event for the run's stream (see ``run_progress``)."""
        self._put(ReportItem("phase", {"phase": name, "since": since}))

    def rewind(self, step: int) -> None:
        self._put(ReportItem("rewind", {"step": step}))

    def flush(self) -> None:
        """Waits until every report is stored; raises ``ReportFailed`` if one was not."""
        self._queue.join()
        self._raise_if_failed()

    # -- the writer thread --------------------------------------------------------------

    def _put(self, item: ReportItem) -> None:
        self._raise_if_failed()
        self._queue.put(item)

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise ReportFailed(f"storing the run's reports failed: {_describe(self._error)}")

    def _write_forever(self) -> None:
        _lower_priority()
        while True:
            items = [self._queue.get()]
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                if self._error is None:
                    self._write(items)
            except Exception as error:  # kept, and raised in the training thread
                self._error = error
            finally:
                for _ in items:
                    self._queue.task_done()

    def _write(self, items: list[ReportItem]) -> None:
        raise NotImplementedError


class OwnedEngine(Protocol):
    """What ``RunReporter`` needs of the engine it opened: to dispose of it when closed."""

    def dispose(self) -> None: ...


class RunReporter(QueuedReporter):
    """The local path: reports go straight to the database; files are already in place."""

    def __init__(self, store: RunStore, engine: OwnedEngine | None, run_id: str):
        super().__init__(run_id)
        self.store = store
        self.engine = engine
        self._cancel_checked = 0.0
        self._cancelled = False

    @classmethod
    def open(cls, settings: Settings, run_id: str) -> RunReporter:
        engine = make_engine(settings.db_url)
        return cls(RunStore(make_sessionmaker(engine), settings.runs_dir), engine, run_id)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.dispose()

    def cancel_requested(self) -> bool:
        """Whether the run was cancelled (asked at most every ``CANCEL_POLL_S``)."""
        now = time.monotonic()
        if not self._cancelled and now - self._cancel_checked >= CANCEL_POLL_S:
            self._cancel_checked = now
            self._cancelled = self.store.cancel_requested(self.run_id)
        return self._cancelled

    def run_spec(self, run_id: str) -> dict[str, Any]:
        return dict(self.store.get(run_id).spec)

    def checkpoint_input(
        self, run_id: str, step: int | None, run_dir: Path
    ) -> artifacts.Checkpoint | None:
        return artifacts.find_checkpoint(run_dir, step)

    def _write(self, items: list[ReportItem]) -> None:
        self.store.record_items(self.run_id, items)


WRITER_NICENESS = 10


def _lower_priority() -> None:
    """Lowers this thread's CPU priority (Linux schedules threads one by one): storing
    reports may wait a few milliseconds, training's threads should not."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WRITER_NICENESS)


def _describe(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    cause = error.__cause__ or error.__context__
    if cause is not None and str(cause):
        return f"{type(error).__name__}: {cause}"
    return f"{type(error).__name__}: {error}"
