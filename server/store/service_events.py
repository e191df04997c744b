"""The service event log: one sequence for the whole service (``WS /api/events``).

Every change a runs list shows (created, status, progress, name/tags/notes updated,
deleted) appends a row to ``service_events`` in the transaction that makes the change:
gapless and in commit order because its writers take turns (SQLite has one writer at a
time; on PostgreSQL a transaction-scoped advisory lock is taken before the seq is chosen,
and held to the commit). The oldest service events are pruned beyond
``SERVICE_EVENTS_KEPT``.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import delete, func, select, text
from sqlalchemy.orm import Session, sessionmaker

from server.store.db import dialect
from server.store.models import RunRow, ServiceEventRow

SERVICE_EVENTS_KEPT = 100_000
"""Service events kept; older ones are pruned (every ``PRUNE_EVERY`` events)."""
PRUNE_EVERY = 1000
_SERVICE_EVENTS_LOCK = 0x6E6E7865
"""PostgreSQL advisory lock key of the service events' writers (see the module doc)."""


def append_service_event(session: Session, run_id: str, kind: str, payload: dict[str, Any]) -> None:
    """Appends a service event about run ``run_id`` in the caller's transaction."""
    row = ServiceEventRow(type=kind, run_id=run_id, time=time.time(), payload=payload)
    if dialect(session) == "postgresql":
        # Writers take turns until they commit, and the seq follows the newest one: in
        # commit order and without the gaps that a sequence leaves on rollback.
        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SERVICE_EVENTS_LOCK})
        row.seq = newest_seq(session) + 1
    session.add(row)
    session.flush()
    if row.seq % PRUNE_EVERY == 0:
        session.execute(
            delete(ServiceEventRow).where(ServiceEventRow.seq <= row.seq - SERVICE_EVENTS_KEPT)
        )


def newest_seq(session: Session) -> int:
    """The newest service event's seq (0 before any)."""
    return int(session.scalar(select(func.coalesce(func.max(ServiceEventRow.seq), 0))) or 0)


def run_progress(run: RunRow) -> dict[str, Any]:
    """What a runs list shows of a run's progress: steps and its newest ``eval/`` values."""
    evals = {k: v for k, v in run.latest_metrics.items() if k.startswith("eval/")}
    return {"steps": run.steps, "total_steps": run.total_steps, "latest_metrics": evals}


def service_event_public(row: ServiceEventRow) -> dict[str, Any]:
    return {"seq": row.seq, "type": row.type, "run_id": row.run_id, "time": row.time, **row.payload}


class ServiceEventReads:
    """``RunStore``'s reads of the service event log."""

    sessions: sessionmaker[Session]

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
            return newest_seq(session)
