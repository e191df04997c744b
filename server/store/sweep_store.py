"""The sweep store: sweeps, their events, and their trials (runs that carry the sweep's id
and a trial number), in atomic transactions.

A sweep's status: ``running`` (it keeps trials queued), ``cancelling`` (cancelled while
trials were still active), then one of ``finished``, ``cancelled``, ``failed``. Each change
appends a ``status`` event in the same transaction; trial events are appended by the
sweep driver (``server.api.sweep_driver``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from server.store.db import transaction
from server.store.models import MetricRow, RunRow, SweepEventRow, SweepJournalRow, SweepRow
from server.store.run_status import TERMINAL, RunStatus
from server.store.run_store import RunStore

ACTIVE = ("running", "cancelling")
FINISHED = ("finished", "cancelled", "failed")


class SweepNotFound(Exception):
    def __init__(self, sweep_id: str):
        super().__init__(f"sweep {sweep_id!r} not found")
        self.sweep_id = sweep_id


class SweepActive(Exception):
    """A sweep (or one of its trials) that has not finished, where that is needed."""


@dataclass(frozen=True)
class SweepFilter:
    status: str | None = None
    limit: int = 50
    offset: int = 0


def new_sweep_id() -> str:
    return "s" + uuid.uuid4().hex[:11]


class SweepStore:
    def __init__(self, sessions: sessionmaker[Session], runs: RunStore):
        self.sessions = sessions
        self.runs = runs

    # -- sweeps -------------------------------------------------------------------------

    def create(self, request: Mapping[str, Any], *, name: str, base_total_steps: int) -> SweepRow:
        sweep = SweepRow(
            id=new_sweep_id(),
            name=name,
            status="running",
            request=dict(request),
            base_total_steps=base_total_steps,
            created_at=time.time(),
            last_seq=0,
        )
        with transaction(self.sessions) as session:
            session.add(sweep)
            session.flush()
            self._append(session, sweep, "status", {"status": "running", "error": None})
        return sweep

    def get(self, sweep_id: str) -> SweepRow:
        with self.sessions() as session:
            sweep = session.get(SweepRow, sweep_id)
            if sweep is None:
                raise SweepNotFound(sweep_id)
            return sweep

    def list_sweeps(self, f: SweepFilter) -> tuple[list[SweepRow], int]:
        query = select(SweepRow)
        if f.status:
            query = query.where(SweepRow.status == f.status)
        with self.sessions() as session:
            total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
            rows = session.scalars(
                query.order_by(SweepRow.created_at.desc()).limit(f.limit).offset(f.offset)
            ).all()
            return list(rows), total

    def active(self) -> list[SweepRow]:
        with self.sessions() as session:
            return list(
                session.scalars(
                    select(SweepRow)
                    .where(SweepRow.status.in_(ACTIVE))
                    .order_by(SweepRow.created_at)
                ).all()
            )

    def set_status(self, sweep_id: str, status: str, error: str | None = None) -> SweepRow:
        """Moves the sweep to ``status`` (with its event); a finished sweep stays as it is."""
        with transaction(self.sessions) as session:
            sweep = self._get(session, sweep_id)
            if sweep.status in FINISHED or sweep.status == status:
                return sweep
            sweep.status = status
            if status in FINISHED:
                sweep.finished_at = time.time()
                sweep.error = error
            self._append(session, sweep, "status", {"status": status, "error": error})
            return sweep

    def cancel(self, sweep_id: str) -> SweepRow:
        """A running sweep queues no more trials and its active trials are cancelled; it is
        ``cancelling`` until they have ended (the driver then makes it ``cancelled``)."""
        sweep = self.get(sweep_id)
        if sweep.status != "running":
            return sweep
        sweep = self.set_status(sweep_id, "cancelling")
        for run in self.trials(sweep_id):
            if RunStatus(run.status) not in TERMINAL:
                self.runs.request_cancel(run.id)
        return sweep

    def delete(self, sweep_id: str) -> None:
        """Deletes a finished sweep, its events and its trials (runs and their files);
        ``SweepActive`` while the sweep or a trial has not finished."""
        sweep = self.get(sweep_id)
        trials = self.trials(sweep_id)
        if sweep.status not in FINISHED or any(RunStatus(r.status) not in TERMINAL for r in trials):
            raise SweepActive(f"sweep {sweep_id} is {sweep.status}: cancel it first")
        for run in trials:
            self.runs.delete(run.id)
        with transaction(self.sessions) as session:
            session.execute(delete(SweepEventRow).where(SweepEventRow.sweep_id == sweep_id))
            session.execute(delete(SweepJournalRow).where(SweepJournalRow.sweep_id == sweep_id))
            session.execute(delete(SweepRow).where(SweepRow.id == sweep_id))

    # -- trials -------------------------------------------------------------------------

    def trials(self, sweep_id: str) -> list[RunRow]:
        with self.sessions() as session:
            return list(
                session.scalars(
                    select(RunRow).where(RunRow.sweep_id == sweep_id).order_by(RunRow.trial)
                ).all()
            )

    def trial_counts(self, sweep_ids: list[str]) -> dict[str, dict[str, int]]:
        """Per sweep: its trials' count by status."""
        out: dict[str, dict[str, int]] = {s: {} for s in sweep_ids}
        if not sweep_ids:
            return out
        with self.sessions() as session:
            rows = session.execute(
                select(RunRow.sweep_id, RunRow.status, func.count())
                .where(RunRow.sweep_id.in_(sweep_ids))
                .group_by(RunRow.sweep_id, RunRow.status)
            ).all()
        for sweep_id, status, count in rows:
            out[str(sweep_id)][str(status)] = int(count)
        return out

    def add_trial(
        self,
        sweep: SweepRow,
        number: int,
        spec: dict[str, Any],
        params: dict[str, Any],
        total_steps: int,
    ) -> RunRow:
        """The queued run of trial ``number``, or the one that already exists."""
        name = f"{sweep.name} #{number}"
        try:
            return self.runs.create(
                spec,
                kind=spec["kind"],
                name=name[:200],
                tags=spec.get("tags") or [],
                notes=spec.get("notes") or "",
                total_steps=total_steps,
                sweep_id=sweep.id,
                trial=number,
                trial_params=params,
            )
        except IntegrityError:
            with self.sessions() as session:
                existing = session.scalars(
                    select(RunRow).where(RunRow.sweep_id == sweep.id, RunRow.trial == number)
                ).first()
            if existing is None:
                raise
            return existing

    def metric_after(
        self, run_id: str, key: str, after_step: int
    ) -> list[tuple[int, float | None]]:
        """The run's points of metric ``key`` after ``after_step`` (NaN as None)."""
        with self.sessions() as session:
            rows = session.execute(
                select(MetricRow.step, MetricRow.value)
                .where(
                    MetricRow.run_id == run_id,
                    MetricRow.key == key,
                    MetricRow.step > after_step,
                )
                .order_by(MetricRow.step)
            ).all()
        return [(int(step), value) for step, value in rows]

    # -- events -------------------------------------------------------------------------

    def append(self, sweep_id: str, kind: str, payload: dict[str, Any]) -> None:
        with transaction(self.sessions) as session:
            self._append(session, self._get(session, sweep_id), kind, payload)

    def events_after(self, sweep_id: str, after_seq: int, limit: int = 500) -> list[dict[str, Any]]:
        with self.sessions() as session:
            rows = session.scalars(
                select(SweepEventRow)
                .where(SweepEventRow.sweep_id == sweep_id, SweepEventRow.seq > after_seq)
                .order_by(SweepEventRow.seq)
                .limit(limit)
            ).all()
            return [{"seq": r.seq, "type": r.type, "time": r.time, **r.payload} for r in rows]

    def all_events(self, sweep_id: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            batch = self.events_after(sweep_id, out[-1]["seq"] if out else 0, 1000)
            out.extend(batch)
            if len(batch) < 1000:
                return out

    # -- internals ----------------------------------------------------------------------

    @staticmethod
    def _get(session: Session, sweep_id: str) -> SweepRow:
        """The sweep's row, locked until the transaction ends (PostgreSQL: ``FOR UPDATE``,
        so that two writers never take the same event number)."""
        sweep = session.get(SweepRow, sweep_id, with_for_update=True)
        if sweep is None:
            raise SweepNotFound(sweep_id)
        return sweep

    @staticmethod
    def _append(session: Session, sweep: SweepRow, kind: str, payload: dict[str, Any]) -> None:
        sweep.last_seq += 1
        session.add(
            SweepEventRow(
                sweep_id=sweep.id, seq=sweep.last_seq, type=kind, time=time.time(), payload=payload
            )
        )
        session.flush()
