"""The recordings of runs' checkpoints in the database: requests, the job queue, status
transitions, each in one transaction that also appends a ``recording`` event (the
recording as ``recording_public`` shows it) to its run's stream.

The row is the source of truth for a recording; its files are ``server.recording.storage``'s.
The recording runner (``server.recording.runner``) claims queued recordings oldest first.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from server.store.db import transaction
from server.store.models import RecordingRow
from server.store.recording_status import (
    TRANSITIONS,
    RecordingStatus,
    RecordingTransitionError,
)
from server.store.run_events import append_event, lock_run

EVENT = "recording"
"""The type of the run stream's events about its recordings."""


class RecordingNotFound(Exception):
    def __init__(self, run_id: str, recording_id: int):
        super().__init__(f"run {run_id} has no recording {recording_id}")
        self.run_id = run_id
        self.recording_id = recording_id


@dataclass(frozen=True)
class RecordingRequest:
    """What a recording records: a checkpoint of a run, ``n_envs`` envs for
    ``episode_length`` steps from the env resets of ``seed``, optionally env 0's video."""

    run_id: str
    step: int
    n_envs: int
    episode_length: int
    seed: int
    video: bool
    estimated_bytes: int


def recording_public(row: RecordingRow, *, manifest: bool = False) -> dict[str, Any]:
    """The API's view of a recording (``schemas.RecordingPublic``); the manifest only when
    asked (the list and the stream events leave it out)."""
    base = f"/api/runs/{row.run_id}/recordings/{row.id}"
    succeeded = row.status == RecordingStatus.SUCCEEDED
    public: dict[str, Any] = {
        "id": row.id,
        "run_id": row.run_id,
        "status": row.status,
        "step": row.step,
        "n_envs": row.n_envs,
        "episode_length": row.episode_length,
        "seed": row.seed,
        "video": row.video,
        "estimated_bytes": row.estimated_bytes,
        "bytes": row.bytes,
        "error": row.error,
        "cancel_requested": row.cancel_requested,
        "created_at": row.created_at,
        "started_at": row.started_at,
        "finished_at": row.finished_at,
        "url": base,
        "data_url": f"{base}/data" if succeeded else None,
        "video_url": f"{base}/video" if succeeded and row.video else None,
    }
    if manifest:
        public["manifest"] = row.manifest
    return public


def _transition(session: Session, row: RecordingRow, name: str) -> None:
    sources, target = TRANSITIONS[name]
    if RecordingStatus(row.status) not in sources:
        raise RecordingTransitionError(row.id, name, row.status)
    row.status = target.value
    now = time.time()
    if target is RecordingStatus.RUNNING:
        row.started_at = now
    elif target.finished:
        row.finished_at = now
        row.pid = None


def _event(session: Session, row: RecordingRow) -> None:
    session.flush()
    append_event(session, lock_run(session, row.run_id), EVENT, {EVENT: recording_public(row)})


class RecordingStore:
    """Recordings in the database (see the module doc)."""

    def __init__(self, sessions: sessionmaker[Session]):
        self.sessions = sessions

    def create(self, request: RecordingRequest) -> RecordingRow:
        """A new queued recording, with its event (``RunNotFound`` for an unknown run)."""
        with transaction(self.sessions) as session:
            lock_run(session, request.run_id)
            row = RecordingRow(
                run_id=request.run_id,
                status=RecordingStatus.QUEUED.value,
                step=request.step,
                n_envs=request.n_envs,
                episode_length=request.episode_length,
                seed=request.seed,
                video=request.video,
                estimated_bytes=request.estimated_bytes,
                cancel_requested=False,
                created_at=time.time(),
            )
            session.add(row)
            _event(session, row)
            return row

    def add_uploaded(
        self, run_id: str, manifest: dict[str, Any], publish: Callable[[int], int]
    ) -> RecordingRow:
        """A recording its run's script made and uploaded (``server.recording.upload``):
        succeeded from the start, with ``manifest``. In one transaction: the row, then
        ``publish(id)`` (moves its files into place, returns their size), then its event; a
        failed ``publish`` adds nothing (``RunNotFound`` for an unknown run)."""
        activations = [a for a in manifest["arrays"].values() if a["kind"] == "activations"]
        with transaction(self.sessions) as session:
            lock_run(session, run_id)
            now = time.time()
            row = RecordingRow(
                run_id=run_id,
                status=RecordingStatus.SUCCEEDED.value,
                step=int(manifest["step"]),
                n_envs=int(manifest["n_envs"]),
                episode_length=int(manifest["episode_length"]),
                seed=int(manifest["seed"]),
                video=False,
                estimated_bytes=sum(4 * math.prod(a["shape"]) for a in activations),
                manifest=manifest,
                cancel_requested=False,
                created_at=now,
                started_at=now,
                finished_at=now,
            )
            session.add(row)
            session.flush()
            row.bytes = publish(row.id)
            _event(session, row)
            return row

    def of_run(self, run_id: str) -> list[RecordingRow]:
        """The run's recordings, oldest first."""
        with self.sessions() as session:
            query = select(RecordingRow).where(RecordingRow.run_id == run_id)
            return list(session.scalars(query.order_by(RecordingRow.id)).all())

    def get(self, run_id: str, recording_id: int) -> RecordingRow:
        with self.sessions() as session:
            row = session.get(RecordingRow, recording_id)
            if row is None or row.run_id != run_id:
                raise RecordingNotFound(run_id, recording_id)
            return row

    def claim_next(self, pid_of: int | None = None) -> RecordingRow | None:
        """The oldest queued recording, now running (None when none is queued)."""
        with transaction(self.sessions) as session:
            query = (
                select(RecordingRow)
                .where(RecordingRow.status == RecordingStatus.QUEUED.value)
                .order_by(RecordingRow.created_at, RecordingRow.id)
                .limit(1)
                .with_for_update(skip_locked=True)
            )
            row = session.scalars(query).first()
            if row is None:
                return None
            _transition(session, row, "start")
            row.pid = pid_of
            _event(session, row)
            return row

    def set_pid(self, recording_id: int, pid: int | None) -> None:
        with transaction(self.sessions) as session:
            row = session.get(RecordingRow, recording_id)
            if row is not None:
                row.pid = pid

    def end(
        self,
        recording_id: int,
        transition: str,
        *,
        error: str | None = None,
        size: int | None = None,
        manifest: dict[str, Any] | None = None,
    ) -> RecordingRow | None:
        """Makes ``transition`` (``finish``, ``fail`` or ``cancel``) with its results;
        None when the recording is gone (its run was deleted)."""
        with transaction(self.sessions) as session:
            row = session.get(RecordingRow, recording_id, with_for_update=True)
            if row is None:
                return None
            _transition(session, row, transition)
            row.error = error
            if size is not None:
                row.bytes = size
            if manifest is not None:
                row.manifest = manifest
            _event(session, row)
            return row

    def request_cancel(self, run_id: str, recording_id: int) -> RecordingRow:
        """A queued recording is cancelled at once; a running one when its runner sees
        the request (``cancel_requested``).

        Raises:
            RecordingNotFound: No such recording of the run.
            RecordingTransitionError: The recording has ended.
        """
        with transaction(self.sessions) as session:
            row = session.get(RecordingRow, recording_id, with_for_update=True)
            if row is None or row.run_id != run_id:
                raise RecordingNotFound(run_id, recording_id)
            if row.status == RecordingStatus.QUEUED:
                _transition(session, row, "cancel")
            elif row.status == RecordingStatus.RUNNING:
                row.cancel_requested = True
            else:
                raise RecordingTransitionError(row.id, "cancel", row.status)
            _event(session, row)
            return row

    def cancel_requested(self, recording_id: int) -> bool:
        """Whether the recording is to stop (cancelled, or gone with its run)."""
        with self.sessions() as session:
            row = session.get(RecordingRow, recording_id)
            return row is None or row.cancel_requested

    def fail_running(self, reason: str) -> list[int]:
        """Fails every running recording (at start-up: the process that ran them is gone);
        returns their ids."""
        with transaction(self.sessions) as session:
            query = select(RecordingRow).where(RecordingRow.status == RecordingStatus.RUNNING.value)
            rows = list(session.scalars(query).all())
            for row in rows:
                _transition(session, row, "fail")
                row.error = reason
                _event(session, row)
            return [row.id for row in rows]
