"""The run store: every change to runs, their events and metrics, in atomic transactions.

The API, the worker supervisor and the run processes all go through ``RunStore``. It is
composed of one part per job, each in its module:

- here: creating, reading, listing, renaming and deleting runs;
- ``run_transitions``: status changes (``transition``) and the claim queue;
- ``run_events``: what a run reports (``record_items``, the one path for its events) and
  the reads of its events and videos; ``metric_ingest`` stores its metrics and rollups;
- ``service_events``: the service's event log (``WS /api/events``), appended to in the
  transaction of every change that a runs list shows;
- ``worker_registry``: the workers and the recovery of the runs a dead one left running.

The store returns rows and plain dicts; the API turns them into its response models.
"""

from __future__ import annotations

import re
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, delete, func, select, text, update
from sqlalchemy.orm import Session, sessionmaker

from server.store.db import dialect, transaction
from server.store.models import (
    EventRow,
    MetricKeyRow,
    MetricRow,
    RecordingRow,
    RunRow,
    VideoRow,
)
from server.store.run_events import RunEventRecording, append_event, lock_run
from server.store.run_events import RunNotFound as RunNotFound
from server.store.run_events import video_public as video_public
from server.store.run_status import TERMINAL, RunStatus, TransitionError
from server.store.run_transitions import RunTransitions, apply_transition
from server.store.service_events import ServiceEventReads, append_service_event, newest_seq
from server.store.worker_registry import WorkerRegistry

_TAG_MATCH = {
    "sqlite": text("EXISTS (SELECT 1 FROM json_each(runs.tags) WHERE value = :tag)"),
    "postgresql": text(
        "EXISTS (SELECT 1 FROM json_array_elements_text(runs.tags) AS t(value) "
        "WHERE t.value = :tag)"
    ),
}

PUBLIC_FIELDS = (
    "id",
    "kind",
    "name",
    "status",
    "spec",
    "tags",
    "notes",
    "created_at",
    "started_at",
    "finished_at",
    "steps",
    "total_steps",
    "latest_metrics",
    "error",
    "last_seq",
    "cancel_requested",
    "attempts",
    "pid",
    "sweep_id",
    "trial",
    "trial_params",
    "node",
    "external",
)
"""The columns of a run that the API shows (``schemas.RunPublic``'s fields)."""


@dataclass(frozen=True)
class RunFilter:
    status: str | None = None
    kind: str | None = None
    tag: str | None = None
    q: str | None = None
    sweep_id: str | None = None
    limit: int = 50
    offset: int = 0


RUN_ID = re.compile(r"[0-9a-f]{12}")
"""The form of a run's id (``new_run_id``)."""


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def run_fields(run: RunRow) -> dict[str, Any]:
    """The run's ``PUBLIC_FIELDS`` as JSON values (a ``created`` service event's run)."""
    return {field: getattr(run, field) for field in PUBLIC_FIELDS}


class RunStore(RunTransitions, RunEventRecording, ServiceEventReads, WorkerRegistry):
    """Runs, events, metrics, videos and workers in the database (see the module doc)."""

    def __init__(self, sessions: sessionmaker[Session], runs_dir: Path):
        self.sessions = sessions
        self.runs_dir = runs_dir

    @property
    def engine(self) -> Engine:
        """The engine of its sessions (reads of one snapshot, streamed exports)."""
        engine: Engine = self.sessions.kw["bind"]
        return engine

    def create(
        self,
        spec: Mapping[str, Any],
        *,
        kind: str,
        name: str,
        tags: Sequence[str],
        notes: str,
        total_steps: int,
        sweep_id: str | None = None,
        trial: int | None = None,
        trial_params: Mapping[str, Any] | None = None,
        steps: int = 0,
        tracked_token_hash: str | None = None,
    ) -> RunRow:
        """A new queued run (its first event is the ``queued`` status); a sweep's trial
        names its sweep and trial number (unique per sweep: a second raises
        ``IntegrityError``). ``steps``: where its progress starts (a resumed checkpoint's
        step; metrics at or below it are never stored for it).

        With ``tracked_token_hash``, a tracked run (``external``) instead: started in the
        same transaction (``running``, never queued for a worker), reporting with the run
        token of that hash (``server.store.tracked_runs``)."""
        now = time.time()
        run = RunRow(
            id=new_run_id(),
            kind=kind,
            name=name,
            status=RunStatus.QUEUED.value,
            spec=dict(spec),
            tags=list(tags),
            notes=notes,
            created_at=now,
            queued_at=now,
            steps=steps,
            total_steps=total_steps,
            latest_metrics={},
            last_seq=0,
            cancel_requested=False,
            attempts=0,
            external=tracked_token_hash is not None,
            sweep_id=sweep_id,
            trial=trial,
            trial_params=dict(trial_params) if trial_params is not None else None,
        )
        with transaction(self.sessions) as session:
            session.add(run)
            session.flush()
            append_event(session, run, "status", {"status": run.status, "error": None})
            append_service_event(session, run.id, "created", {"run": run_fields(run)})
            if tracked_token_hash is not None:
                apply_transition(
                    session,
                    run,
                    "start",
                    None,
                    started_at=now,
                    attempts=1,
                    token_hash=tracked_token_hash,
                    reported_at=now,
                )
        return run

    def get(self, run_id: str) -> RunRow:
        with self.sessions() as session:
            run = session.get(RunRow, run_id)
            if run is None:
                raise RunNotFound(run_id)
            return run

    def list_runs(self, f: RunFilter) -> tuple[list[RunRow], int]:
        rows, total, _ = self.list_runs_with_seq(f)
        return rows, total

    def list_runs_with_seq(self, f: RunFilter) -> tuple[list[RunRow], int, int]:
        """The runs, their total and the newest service event's seq, from one snapshot of
        the database: following ``WS /api/events`` after that seq misses no change."""
        query = select(RunRow)
        if f.status:
            query = query.where(RunRow.status == f.status)
        if f.kind:
            query = query.where(RunRow.kind == f.kind)
        if f.sweep_id:
            query = query.where(RunRow.sweep_id == f.sweep_id)
        if f.q:
            query = query.where(RunRow.name.icontains(f.q, autoescape=True))
        # One read transaction: one snapshot on SQLite; on PostgreSQL (READ COMMITTED) the
        # seq is read before the runs, so a change is at worst both shown and replayed.
        with self.sessions() as session:
            if f.tag:
                tag_match = _TAG_MATCH[dialect(session)]
                query = query.where(tag_match.bindparams(tag=f.tag))
            seq = newest_seq(session)
            total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
            rows = session.scalars(
                query.order_by(RunRow.created_at.desc()).limit(f.limit).offset(f.offset)
            ).all()
            return list(rows), total, seq

    def update_meta(
        self, run_id: str, *, name: str | None, tags: Sequence[str] | None, notes: str | None
    ) -> RunRow:
        with transaction(self.sessions) as session:
            run = lock_run(session, run_id)
            if name is not None:
                run.name = name
            if tags is not None:
                run.tags = list(tags)
            if notes is not None:
                run.notes = notes
            append_service_event(
                session,
                run.id,
                "updated",
                {"name": run.name, "tags": list(run.tags), "notes": run.notes},
            )
            return run

    def delete(self, run_id: str) -> None:
        """Deletes a finished run, its rows and its files; ``TransitionError`` otherwise."""
        with transaction(self.sessions) as session:
            run = lock_run(session, run_id)
            if RunStatus(run.status) not in TERMINAL:
                raise TransitionError(run_id, "delete", run.status)
            for table in (EventRow, MetricRow, MetricKeyRow, VideoRow, RecordingRow):
                session.execute(delete(table).where(table.run_id == run_id))
            session.execute(text("DELETE FROM metric_rollups WHERE run_id = :r"), {"r": run_id})
            session.delete(run)
            append_service_event(session, run_id, "deleted", {})
        run_dir = self.runs_dir / run_id
        if run_dir.parent == self.runs_dir:  # ids are hex; never leaves runs_dir
            shutil.rmtree(run_dir, ignore_errors=True)

    def set_pid(self, run_id: str, pid: int | None, *, node: str | None = None) -> None:
        """The run process's id (and, given ``node``, where it runs)."""
        fields: dict[str, Any] = {"pid": pid}
        if node is not None:
            fields["node"] = node
        with transaction(self.sessions) as session:
            session.execute(update(RunRow).where(RunRow.id == run_id).values(**fields))
