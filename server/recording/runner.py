"""The recording runner: a thread of the API process that takes queued recordings one at a
time and records each in a spawned child (``server.recording.job``), crash-isolated.

Host loop: every ``POLL_S`` it claims the oldest queued recording (``RecordingStore``), makes
a staging folder, starts the child and watches it: a cancel request (or the run's deletion)
kills the child and ends the recording ``cancelled``; the child's ``ok`` answer publishes the
staging folder (renamed into ``recordings/<id>/``) and ends it ``succeeded`` with its size and
manifest; an error answer, a child that dies (killed, out of memory) or one past
``timeout_s`` ends it ``failed``. Whatever did not succeed leaves no files. At start, the
recordings left ``running`` by a previous process are failed.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import shutil
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from server import child_processes
from server.recording import job, storage
from server.settings import Settings
from server.store.artifacts import find_checkpoint
from server.store.models import RecordingRow
from server.store.recording_status import RecordingTransitionError
from server.store.recording_store import RecordingStore
from server.store.run_store import RunNotFound, RunStore

log = logging.getLogger("nnx_ppo.server")

POLL_S = 0.5
STOPPED = "the service stopped during the recording"


class JobEnded(Exception):
    """How a recording's child ended when it did not succeed: ``transition`` is ``fail``
    or ``cancel``."""

    def __init__(self, transition: str, message: str | None):
        super().__init__(message or transition)
        self.transition = transition
        self.message = message


class RecordingRunner:
    """Runs queued recordings (see the module doc); ``start``/``stop`` from the lifespan."""

    def __init__(self, settings: Settings, runs: RunStore, recordings: RecordingStore):
        self.settings = settings
        self.runs = runs
        self.recordings = recordings
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._process: mp.process.BaseProcess | None = None

    def start(self) -> None:
        for recording_id in self.recordings.fail_running(STOPPED):
            log.info("recording %s failed: %s", recording_id, STOPPED)
        self._thread = threading.Thread(target=self._loop, daemon=True, name="recording-runner")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        process = self._process
        if process is not None and process.is_alive():
            process.kill()
        if self._thread is not None:
            self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                row = self.recordings.claim_next()
            except Exception:
                log.exception("claiming a recording failed")
                row = None
            if row is None:
                self._stop.wait(POLL_S)
                continue
            self._run(row)

    def _run(self, row: RecordingRow) -> None:
        try:
            run_dir = self.settings.run_dir(row.run_id)
            staging = storage.staging_dir(run_dir, row.id)
        except OSError as error:
            self._end(row.id, "fail", f"cannot make the recording's folder: {error}")
            return
        try:
            manifest = self._record(row, run_dir, staging)
            size = storage.publish(staging, storage.recording_dir(run_dir, row.id))
        except JobEnded as ended:
            shutil.rmtree(staging, ignore_errors=True)
            self._end(row.id, ended.transition, ended.message)
            return
        except Exception as error:
            log.exception("recording %s failed", row.id)
            shutil.rmtree(staging, ignore_errors=True)
            self._end(row.id, "fail", f"{type(error).__name__}: {error}")
            return
        if self._end(row.id, "finish", None, size=size, manifest=manifest) is None:
            shutil.rmtree(storage.recording_dir(run_dir, row.id), ignore_errors=True)

    def _end(self, recording_id: int, transition: str, error: str | None, **results: Any) -> Any:
        try:
            return self.recordings.end(recording_id, transition, error=error, **results)
        except (RecordingTransitionError, RunNotFound) as problem:
            log.warning("recording %s: %s", recording_id, problem)
            return None

    def _request(self, row: RecordingRow, run_dir: Path, staging: Path) -> job.JobRequest:
        try:
            run = self.runs.get(row.run_id)
        except RunNotFound:
            raise JobEnded("cancel", "the run was deleted") from None
        checkpoint = find_checkpoint(run_dir, row.step)
        if checkpoint is None:
            raise JobEnded("fail", f"run {row.run_id} has no checkpoint at step {row.step}")
        return job.JobRequest(
            run_id=row.run_id,
            checkpoint=str(checkpoint.path),
            step=row.step,
            spec=run.spec,
            n_envs=row.n_envs,
            episode_length=row.episode_length,
            seed=row.seed,
            video=row.video,
            out_dir=str(staging),
            chunk_bytes=self.settings.recording_chunk_bytes,
            jax_platforms=self.settings.recording_jax_platforms,
        )

    def _record(self, row: RecordingRow, run_dir: Path, staging: Path) -> dict[str, Any]:
        request = self._request(row, run_dir, staging)
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe(duplex=False)
        process = ctx.Process(
            target=job.main, args=(child, request), daemon=True, name=f"nnx-ppo-recording-{row.id}"
        )
        child_processes.start(process)
        child.close()
        self._process = process
        try:
            self.recordings.set_pid(row.id, process.pid)
            manifest: dict[str, Any] = self._watch(row.id, process, parent)
            return manifest
        finally:
            parent.close()
            if process.is_alive():
                process.kill()
            process.join(5)
            self._process = None

    def _watch(self, recording_id: int, process: mp.process.BaseProcess, conn: Connection) -> Any:
        deadline = time.monotonic() + self.settings.recording_timeout_s
        while True:
            if self._stop.is_set():
                raise JobEnded("fail", STOPPED)
            if self.recordings.cancel_requested(recording_id):
                raise JobEnded("cancel", None)
            if time.monotonic() > deadline:
                limit = self.settings.recording_timeout_s
                raise JobEnded("fail", f"the recording did not finish within {limit:g} s")
            try:
                ready = conn.poll(POLL_S)
                answer = conn.recv() if ready else None
            except (EOFError, OSError):
                process.join(5)
                raise JobEnded(
                    "fail", f"the recording process died (exit code {process.exitcode})"
                ) from None
            if answer is None:
                continue
            outcome, value = answer
            if outcome == "ok":
                return value
            if outcome == "error":
                raise JobEnded("fail", str(value))
