"""The run store: every change to runs, their events and metrics, in atomic transactions.

The API, the worker supervisor and the run processes all go through it. Status changes
happen only in ``transition``; each appends a ``status`` event in the same transaction, so
the stream and the row never disagree. Event numbers (``seq``) come from the run row's
``last_seq`` counter, incremented in the transaction that stores the event, with the run's
row locked: per run, from 1, without gaps, on SQLite and PostgreSQL alike.

Every change a runs list shows (created, status, progress, name/tags/notes updated,
deleted) also appends a row to ``service_events`` in the same transaction: one sequence
for the whole service (``WS /api/events``), gapless and in commit order because its writers
take turns (SQLite has one writer at a time; on PostgreSQL a transaction-scoped advisory
lock is taken before the seq is chosen, and held to the commit). Progress events are
throttled to one per run every ``PROGRESS_EVERY_S``; the oldest service events are pruned
beyond ``SERVICE_EVENTS_KEPT``.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, insert, select, text, update
from sqlalchemy.orm import Session, sessionmaker

from server import values
from server.schemas import RunPublic
from server.store.db import transaction
from server.store.models import (
    EventRow,
    MetricKeyRow,
    MetricRow,
    RunRow,
    ServiceEventRow,
    VideoRow,
    WorkerRow,
)
from server.store.run_status import PHASES, TERMINAL, TRANSITIONS, RunStatus, TransitionError

ROLLUP_SIZES = (8, 64, 512, 4096)
"""Point counts summarised by the rollup levels (see ``metrics_query``)."""

_UPSERT_ROLLUP = """
    INSERT INTO metric_rollups
        (run_id, key, size, chunk, first_step, last_step, last_value, min_value, max_value, nans,
         last_wall_time)
    VALUES (:run_id, :key, :size, :chunk, :first_step, :last_step, :last_value, :min_value,
            :max_value, :nans, :last_wall_time)
    ON CONFLICT (run_id, key, size, chunk) DO UPDATE SET
        last_step = excluded.last_step,
        last_value = excluded.last_value,
        last_wall_time = excluded.last_wall_time,
        min_value = CASE WHEN excluded.min_value IS NULL THEN metric_rollups.min_value
                         WHEN metric_rollups.min_value IS NULL THEN excluded.min_value
                         ELSE {least}(metric_rollups.min_value, excluded.min_value) END,
        max_value = CASE WHEN excluded.max_value IS NULL THEN metric_rollups.max_value
                         WHEN metric_rollups.max_value IS NULL THEN excluded.max_value
                         ELSE {greatest}(metric_rollups.max_value, excluded.max_value) END,
        nans = metric_rollups.nans + excluded.nans
    """
_UPSERT_ROLLUPS = {
    "sqlite": text(_UPSERT_ROLLUP.format(least="min", greatest="max")),
    "postgresql": text(_UPSERT_ROLLUP.format(least="LEAST", greatest="GREATEST")),
}
"""The rollup upsert per backend (SQLite's two-argument ``min``/``max`` are PostgreSQL's
``LEAST``/``GREATEST``)."""
_TAG_MATCH = {
    "sqlite": text("EXISTS (SELECT 1 FROM json_each(runs.tags) WHERE value = :tag)"),
    "postgresql": text(
        "EXISTS (SELECT 1 FROM json_array_elements_text(runs.tags) AS t(value) "
        "WHERE t.value = :tag)"
    ),
}

PROGRESS_EVERY_S = 1.0
"""At most one ``progress`` service event per run in this long (per writing process)."""
SERVICE_EVENTS_KEPT = 100_000
"""Service events kept; older ones are pruned (every ``PRUNE_EVERY`` events)."""
PRUNE_EVERY = 1000
_SERVICE_EVENTS_LOCK = 0x6E6E7865
"""PostgreSQL advisory lock key of the service events' writers (see the module doc)."""

_UPDATE_COUNT = text("UPDATE metric_keys SET count = :c WHERE run_id = :r AND key = :k")


class RunNotFound(Exception):
    def __init__(self, run_id: str):
        super().__init__(f"run {run_id!r} not found")
        self.run_id = run_id


@dataclass(frozen=True)
class RunFilter:
    status: str | None = None
    kind: str | None = None
    tag: str | None = None
    q: str | None = None
    sweep_id: str | None = None
    limit: int = 50
    offset: int = 0


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


class RunStore:
    """Runs, events, metrics, videos and workers in the database (see the module doc)."""

    def __init__(self, sessions: sessionmaker[Session], runs_dir: Path):
        self.sessions = sessions
        self.runs_dir = runs_dir
        self._progress_at: dict[str, float] = {}
        """Per run, when this store last wrote its ``progress`` event (monotonic)."""

    # -- runs ---------------------------------------------------------------------------

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
    ) -> RunRow:
        """A new queued run (its first event is the ``queued`` status); a sweep's trial
        names its sweep and trial number (unique per sweep: a second raises
        ``IntegrityError``). ``steps``: where its progress starts (a resumed checkpoint's
        step; metrics at or below it are never stored for it)."""
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
            sweep_id=sweep_id,
            trial=trial,
            trial_params=dict(trial_params) if trial_params is not None else None,
        )
        with transaction(self.sessions) as session:
            session.add(run)
            session.flush()
            self._append(session, run, "status", {"status": run.status, "error": None})
            self._service_event(session, run.id, "created", {"run": _run_public(run)})
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
                tag_match = _TAG_MATCH[_dialect(session)]
                query = query.where(tag_match.bindparams(tag=f.tag))
            seq = session.scalar(select(func.coalesce(func.max(ServiceEventRow.seq), 0))) or 0
            total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
            rows = session.scalars(
                query.order_by(RunRow.created_at.desc()).limit(f.limit).offset(f.offset)
            ).all()
            return list(rows), total, seq

    def update_meta(
        self, run_id: str, *, name: str | None, tags: Sequence[str] | None, notes: str | None
    ) -> RunRow:
        with transaction(self.sessions) as session:
            run = self._get(session, run_id)
            if name is not None:
                run.name = name
            if tags is not None:
                run.tags = list(tags)
            if notes is not None:
                run.notes = notes
            self._service_event(
                session,
                run.id,
                "updated",
                {"name": run.name, "tags": list(run.tags), "notes": run.notes},
            )
            return run

    def request_cancel(self, run_id: str) -> RunRow:
        """A queued run is cancelled at once; a running one is asked to stop (its process
        checks ``cancel_requested`` after each iteration); a finished one is left as is."""
        with transaction(self.sessions) as session:
            run = self._get(session, run_id)
            if run.status == RunStatus.QUEUED.value:
                self._transition(session, run, "cancel", None)
            elif run.status in (RunStatus.RUNNING.value, RunStatus.INTERRUPTED.value):
                run.cancel_requested = True
            return run

    def request_prune(self, run_id: str, reason: str) -> bool:
        """Asks a running run to stop as ``pruned`` (with ``reason``); False if it is not
        running."""
        with transaction(self.sessions) as session:
            run = self._get(session, run_id)
            if run.status != RunStatus.RUNNING.value:
                return False
            run.cancel_requested = True
            run.prune_reason = reason
            return True

    def end_stopped(self, run_id: str) -> RunRow:
        """The transition of a run that stopped because it was asked to: ``prune`` (with
        its reason) when its sweep's pruner asked, else ``cancel``."""
        with transaction(self.sessions) as session:
            run = self._get(session, run_id)
            if run.prune_reason is not None:
                self._transition(session, run, "prune", run.prune_reason)
            else:
                self._transition(session, run, "cancel", None)
            return run

    def delete(self, run_id: str) -> None:
        """Deletes a finished run, its rows and its files; ``TransitionError`` otherwise."""
        with transaction(self.sessions) as session:
            run = self._get(session, run_id)
            if RunStatus(run.status) not in TERMINAL:
                raise TransitionError(run_id, "delete", run.status)
            for table in (EventRow, MetricRow, MetricKeyRow, VideoRow):
                session.execute(delete(table).where(table.run_id == run_id))
            session.execute(text("DELETE FROM metric_rollups WHERE run_id = :r"), {"r": run_id})
            session.delete(run)
            self._service_event(session, run_id, "deleted", {})
        run_dir = self.runs_dir / run_id
        if run_dir.parent == self.runs_dir:  # ids are hex; never leaves runs_dir
            shutil.rmtree(run_dir, ignore_errors=True)

    def transition(self, run_id: str, name: str, error: str | None = None, **fields: Any) -> RunRow:
        """Applies transition ``name`` (see ``run_status.TRANSITIONS``) atomically, with its
        status event; ``fields`` are set on the row in the same transaction."""
        with transaction(self.sessions) as session:
            run = self._get(session, run_id)
            self._transition(session, run, name, error, **fields)
            return run

    def claim_next(
        self, worker_id: str, *, free: int | None = None, total: int | None = None
    ) -> RunRow | None:
        """Atomically moves the oldest queued run to ``running`` for ``worker_id``.

        With ``free``/``total`` (the worker's free and all devices), the oldest queued run
        that asks for at most ``total`` devices (``resources.gpus``, default 1) is the
        candidate, and it is claimed only if it asks for at most ``free``: a run waits
        queued, in its place, until enough devices are free; runs asking for more than
        this worker has are left for another.

        Two supervisors can never claim the same run: on SQLite the write lock is held from
        the start of the transaction (``BEGIN IMMEDIATE``); on PostgreSQL the run's row is
        locked (``FOR UPDATE``), and a run another supervisor is claiming is skipped
        (``SKIP LOCKED``) rather than waited for.
        """
        wanted = func.coalesce(RunRow.spec[("resources", "gpus")].as_integer(), 1)
        with transaction(self.sessions) as session:
            query = select(RunRow.id, wanted).where(RunRow.status == RunStatus.QUEUED.value)
            if total is not None:
                query = query.where(wanted <= total)
            first = session.execute(
                query.order_by(RunRow.queued_at, RunRow.created_at)
                .limit(1)
                .with_for_update(skip_locked=True)
            ).first()
            if first is None or (free is not None and first[1] > free):
                return None
            run = self._get(session, first[0])
            self._transition(
                session,
                run,
                "start",
                None,
                worker_id=worker_id,
                started_at=time.time(),
                attempts=run.attempts + 1,
            )
            return run

    # -- what a run process reports -----------------------------------------------------

    def record_metrics(
        self, run_id: str, step: int, wall_time: float, metrics: Mapping[str, float]
    ) -> bool:
        """Stores one step's metrics and their event; False if the step was skipped (see
        ``record_metrics_batch``)."""
        return self.record_metrics_batch(run_id, [(step, wall_time, metrics)]) == 1

    def record_metrics_batch(
        self, run_id: str, batch: Sequence[tuple[int, float, Mapping[str, float]]]
    ) -> int:
        """Stores ``(step, wall_time, metrics)`` entries, each with its ``metrics`` event,
        in one transaction; returns how many were stored.

        A step at or below the newest stored step is skipped (a run that resumed from an
        older checkpoint repeats steps it had stored).
        """
        with transaction(self.sessions) as session:
            return self._store_metrics(session, self._get(session, run_id), batch)

    def _store_metrics(
        self,
        session: Session,
        run: RunRow,
        batch: Sequence[tuple[int, float, Mapping[str, float]]],
    ) -> int:
        """``record_metrics_batch`` in the caller's transaction, the run's row locked."""
        run_id = run.id
        keys = sorted({key for _, _, metrics in batch for key in metrics})
        counts = dict(
            session.execute(
                select(MetricKeyRow.key, MetricKeyRow.count).where(
                    MetricKeyRow.run_id == run_id, MetricKeyRow.key.in_(keys)
                )
            ).all()
        )
        known = set(counts)
        rows: list[dict[str, Any]] = []
        rollups: dict[tuple[str, int, int], dict[str, Any]] = {}
        events: list[dict[str, Any]] = []
        latest = dict(run.latest_metrics)
        for step, wall_time, metrics in batch:
            if step <= run.steps:  # run.steps is the newest step stored
                continue
            for key, value in metrics.items():
                index = counts.get(key, 0)
                counts[key] = index + 1
                stored = values.to_db(float(value))
                rows.append(
                    {
                        "run_id": run_id,
                        "key": key,
                        "step": step,
                        "wall_time": wall_time,
                        "value": stored,
                    }
                )
                for size in ROLLUP_SIZES:
                    _merge_rollup(
                        rollups, run_id, key, size, index // size, (step, wall_time), stored
                    )
            encoded = {k: values.encode(float(v)) for k, v in metrics.items()}
            latest.update(encoded)
            run.steps = step
            run.last_seq += 1
            events.append(
                {
                    "run_id": run_id,
                    "seq": run.last_seq,
                    "type": "metrics",
                    "time": time.time(),
                    "payload": {"step": step, "wall_time": wall_time, "values": encoded},
                }
            )
        if not events:
            return 0
        session.execute(insert(EventRow), events)  # one statement, not one per event
        session.execute(insert(MetricRow), rows)
        session.execute(_UPSERT_ROLLUPS[_dialect(session)], list(rollups.values()))
        updated = [{"r": run_id, "k": k, "c": c} for k, c in counts.items() if k in known]
        if updated:
            session.execute(_UPDATE_COUNT, updated)
        new_keys = [
            {"run_id": run_id, "key": k, "count": c} for k, c in counts.items() if k not in known
        ]
        if new_keys:
            session.execute(insert(MetricKeyRow), new_keys)
        run.latest_metrics = latest
        now = time.monotonic()
        if now - self._progress_at.get(run_id, -math.inf) >= PROGRESS_EVERY_S:
            self._progress_at[run_id] = now
            self._service_event(session, run_id, "progress", _progress(run))
        return len(events)

    def record_video(
        self, run_id: str, step: int, filename: str, episode_reward: float, episode_length: int
    ) -> dict[str, Any]:
        with transaction(self.sessions) as session:
            run = self._get(session, run_id)
            return self._store_video(session, run, step, filename, episode_reward, episode_length)

    def _store_video(
        self,
        session: Session,
        run: RunRow,
        step: int,
        filename: str,
        episode_reward: float,
        episode_length: int,
    ) -> dict[str, Any]:
        run_id = run.id
        video = VideoRow(
            run_id=run_id,
            step=step,
            filename=filename,
            episode_reward=values.to_db(float(episode_reward)),
            episode_length=int(episode_length),
            created_at=time.time(),
        )
        session.add(video)
        session.flush()
        public = video_public(video)
        self._append(session, run, "video", {"video": public})
        return public

    def record_checkpoint(self, run_id: str, checkpoint: dict[str, Any]) -> None:
        with transaction(self.sessions) as session:
            run = self._get(session, run_id)
            self._append(session, run, "checkpoint", {"checkpoint": checkpoint})

    def record_log(self, run_id: str, line: str) -> None:
        with transaction(self.sessions) as session:
            run = self._get(session, run_id)
            self._append(session, run, "log", {"line": line})

    def record_phase(self, run_id: str, phase: str, since: float) -> None:
        with transaction(self.sessions) as session:
            self._append(session, self._get(session, run_id), "phase", phase_payload(phase, since))

    def set_pid(self, run_id: str, pid: int | None, *, node: str | None = None) -> None:
        """The run process's id (and, given ``node``, where it runs)."""
        fields: dict[str, Any] = {"pid": pid}
        if node is not None:
            fields["node"] = node
        with transaction(self.sessions) as session:
            session.execute(update(RunRow).where(RunRow.id == run_id).values(**fields))

    def cancel_requested(self, run_id: str) -> bool:
        with self.sessions() as session:
            return bool(session.scalar(select(RunRow.cancel_requested).where(RunRow.id == run_id)))

    # -- reading events and artifacts ---------------------------------------------------

    def service_events_after(self, after_seq: int, limit: int = 500) -> list[dict[str, Any]]:
        """Service events with seq > ``after_seq``, oldest first."""
        with self.sessions() as session:
            rows = session.scalars(
                select(ServiceEventRow)
                .where(ServiceEventRow.seq > after_seq)
                .order_by(ServiceEventRow.seq)
                .limit(limit)
            ).all()
            return [service_event_public(row) for row in rows]

    def service_events_seq(self) -> int:
        """The newest service event's seq (0 before any)."""
        with self.sessions() as session:
            return session.scalar(select(func.coalesce(func.max(ServiceEventRow.seq), 0))) or 0

    def events_after(self, run_id: str, after_seq: int, limit: int = 500) -> list[dict[str, Any]]:
        with self.sessions() as session:
            rows = session.scalars(
                select(EventRow)
                .where(EventRow.run_id == run_id, EventRow.seq > after_seq)
                .order_by(EventRow.seq)
                .limit(limit)
            ).all()
            return [event_public(row) for row in rows]

    def videos(self, run_id: str) -> list[VideoRow]:
        with self.sessions() as session:
            return list(
                session.scalars(
                    select(VideoRow).where(VideoRow.run_id == run_id).order_by(VideoRow.step)
                ).all()
            )

    def video(self, run_id: str, video_id: int) -> VideoRow | None:
        with self.sessions() as session:
            video = session.get(VideoRow, video_id)
            return video if video is not None and video.run_id == run_id else None

    # -- workers ------------------------------------------------------------------------

    def register_worker(self, slots: Sequence[str], executor: str = "local") -> str:
        worker_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        now = time.time()
        with transaction(self.sessions) as session:
            session.add(
                WorkerRow(
                    id=worker_id,
                    hostname=socket.gethostname(),
                    pid=os.getpid(),
                    started_at=now,
                    heartbeat_at=now,
                    slots=list(slots),
                    stopped=False,
                    executor=executor,
                )
            )
        return worker_id

    def heartbeat(
        self,
        worker_id: str,
        device_use: list[dict[str, Any]] | None = None,
        cluster: list[dict[str, Any]] | None = None,
    ) -> None:
        """Keeps the worker alive; ``device_use`` and ``cluster`` (when given) replace what
        it reported."""
        values: dict[str, Any] = {"heartbeat_at": time.time()}
        if device_use is not None:
            values["device_use"] = device_use
        if cluster is not None:
            values["cluster"] = cluster
        with transaction(self.sessions) as session:
            session.execute(update(WorkerRow).where(WorkerRow.id == worker_id).values(**values))

    def stop_worker(self, worker_id: str) -> None:
        with transaction(self.sessions) as session:
            session.execute(update(WorkerRow).where(WorkerRow.id == worker_id).values(stopped=True))

    def workers(self) -> list[WorkerRow]:
        with self.sessions() as session:
            return list(
                session.scalars(
                    select(WorkerRow)
                    .where(WorkerRow.stopped.is_(False))
                    .order_by(WorkerRow.started_at)
                ).all()
            )

    def orphans(self, timeout: float, own_worker: str) -> list[RunRow]:
        """Runs left ``running`` by a dead worker (see ``recover_orphans``), not changed."""
        now, host = time.time(), socket.gethostname()
        with self.sessions() as session:
            workers = {w.id: w for w in session.scalars(select(WorkerRow)).all()}
            running = session.scalars(
                select(RunRow).where(RunRow.status == RunStatus.RUNNING.value)
            ).all()
            return [
                run
                for run in running
                if run.worker_id != own_worker
                and (
                    (worker := workers.get(run.worker_id or "")) is None
                    or worker_dead(worker, now, timeout, host)
                )
            ]

    def adopt(self, run_id: str, worker_id: str, old_worker: str | None) -> bool:
        """Moves a running run of ``old_worker`` to ``worker_id`` (a worker that took over
        its process); False if it is no longer that worker's running run."""
        with transaction(self.sessions) as session:
            run = self._get(session, run_id)
            if run.status != RunStatus.RUNNING.value or run.worker_id != old_worker:
                return False
            run.worker_id = worker_id
            return True

    def recover_orphans(self, timeout: float, own_worker: str | None = None) -> list[str]:
        """Runs left ``running`` by a worker that is dead (stopped, silent for ``timeout``
        seconds, or a process of this host that no longer exists) become ``interrupted``,
        then ``queued``. Returns their ids."""
        now = time.time()
        host = socket.gethostname()
        recovered = []
        with transaction(self.sessions) as session:
            workers = {w.id: w for w in session.scalars(select(WorkerRow)).all()}
            running = session.scalars(
                select(RunRow)
                .where(RunRow.status == RunStatus.RUNNING.value)
                .order_by(RunRow.id)  # one lock order for every locker of several runs
                .with_for_update()
            ).all()
            for run in running:
                if run.worker_id == own_worker and own_worker is not None:
                    continue
                worker = workers.get(run.worker_id or "")
                if worker is not None and not worker_dead(worker, now, timeout, host):
                    continue
                self._transition(session, run, "interrupt", "its worker stopped")
                # It keeps its place in the queue (queued_at): ahead of runs submitted since.
                self._transition(session, run, "requeue", None, worker_id=None)
                recovered.append(run.id)
            for worker in workers.values():
                if not worker.stopped and worker_dead(worker, now, timeout, host):
                    worker.stopped = True
        return recovered

    # -- internals ----------------------------------------------------------------------

    @staticmethod
    def _get(session: Session, run_id: str) -> RunRow:
        """The run, its row locked until the transaction ends (``FOR UPDATE`` on
        PostgreSQL; SQLite's write transaction already excludes other writers): whoever
        changes a run or appends its events holds it, so ``last_seq`` stays gapless."""
        run = session.get(RunRow, run_id, with_for_update=True)
        if run is None:
            raise RunNotFound(run_id)
        return run

    def _transition(
        self, session: Session, run: RunRow, name: str, error: str | None, **fields: Any
    ) -> None:
        sources, target = TRANSITIONS[name]
        if RunStatus(run.status) not in sources:
            raise TransitionError(run.id, name, run.status)
        run.status = target.value
        if error is not None or target in TERMINAL:
            run.error = error
        if target in TERMINAL:
            run.finished_at = time.time()
        if target is not RunStatus.RUNNING:
            run.pid = None
        for field, value in fields.items():
            setattr(run, field, value)
        self._append(session, run, "status", {"status": target.value, "error": error})
        self._service_event(
            session, run.id, "status", {"status": target.value, "error": error, **_progress(run)}
        )

    @staticmethod
    def _append(session: Session, run: RunRow, kind: str, payload: dict[str, Any]) -> None:
        run.last_seq += 1
        session.add(
            EventRow(run_id=run.id, seq=run.last_seq, type=kind, time=time.time(), payload=payload)
        )
        session.flush()

    @staticmethod
    def _service_event(session: Session, run_id: str, kind: str, payload: dict[str, Any]) -> None:
        row = ServiceEventRow(type=kind, run_id=run_id, time=time.time(), payload=payload)
        if _dialect(session) == "postgresql":
            # Writers take turns until they commit, and the seq follows the newest one: in
            # commit order and without the gaps that a sequence leaves on rollback.
            session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SERVICE_EVENTS_LOCK})
            newest = session.scalar(select(func.coalesce(func.max(ServiceEventRow.seq), 0)))
            row.seq = int(newest or 0) + 1
        session.add(row)
        session.flush()
        if row.seq % PRUNE_EVERY == 0:
            session.execute(
                delete(ServiceEventRow).where(ServiceEventRow.seq <= row.seq - SERVICE_EVENTS_KEPT)
            )


def _progress(run: RunRow) -> dict[str, Any]:
    """What a runs list shows of a run's progress: steps and its newest ``eval/`` values."""
    evals = {k: v for k, v in run.latest_metrics.items() if k.startswith("eval/")}
    return {"steps": run.steps, "total_steps": run.total_steps, "latest_metrics": evals}


def _merge_rollup(
    rollups: dict[tuple[str, int, int], dict[str, Any]],
    run_id: str,
    key: str,
    size: int,
    chunk: int,
    at: tuple[int, float],
    value: float | None,
) -> None:
    """Adds one point (``at`` = its step and wall time; ``value`` None: NaN) to the batch's
    summary of its chunk, so that a batch upserts each chunk once (the upsert merges it with
    what is stored)."""
    step, wall_time = at
    nan = int(value is None)
    row = rollups.get((key, size, chunk))
    if row is None:
        rollups[(key, size, chunk)] = {
            "run_id": run_id,
            "key": key,
            "size": size,
            "chunk": chunk,
            "first_step": step,
            "last_step": step,
            "last_value": value,
            "min_value": value,
            "max_value": value,
            "nans": nan,
            "last_wall_time": wall_time,
        }
        return
    row["last_step"], row["last_value"], row["last_wall_time"] = step, value, wall_time
    if value is not None:
        low, high = row["min_value"], row["max_value"]
        row["min_value"] = value if low is None else min(low, value)
        row["max_value"] = value if high is None else max(high, value)
    row["nans"] += nan


def _dialect(session: Session) -> str:
    return session.get_bind().dialect.name


def worker_dead(worker: WorkerRow, now: float, timeout: float, host: str) -> bool:
    if worker.stopped or now - worker.heartbeat_at > timeout:
        return True
    if worker.hostname == host:
        try:
            os.kill(worker.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return _zombie(worker.pid)
    return False


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and waits to be reaped (a killed worker whose parent died
    too stays a zombie where PID 1 does not reap, as in many containers). Linux only."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return False


def phase_payload(phase: str, since: float) -> dict[str, Any]:
    """A ``phase`` event's payload: the run process's phase and when it began (epoch s)."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}")
    return {"phase": phase, "since": float(since)}


def event_public(row: EventRow) -> dict[str, Any]:
    return {"seq": row.seq, "type": row.type, "time": row.time, **row.payload}


def service_event_public(row: ServiceEventRow) -> dict[str, Any]:
    return {"seq": row.seq, "type": row.type, "run_id": row.run_id, "time": row.time, **row.payload}


def video_public(video: VideoRow) -> dict[str, Any]:
    return {
        "id": video.id,
        "step": video.step,
        "episode_reward": values.encode(video.episode_reward),
        "episode_length": video.episode_length,
        "url": f"/api/runs/{video.run_id}/videos/{video.id}",
    }


def _run_public(run: RunRow) -> dict[str, Any]:
    return RunPublic.model_validate(run, from_attributes=True).model_dump(mode="json")
