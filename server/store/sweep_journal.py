"""A sweep's Optuna study, kept in the service's own database.

Optuna's ``JournalStorage`` keeps a study as an append-only log of operations; this
backend stores that log in the ``sweep_journal`` table (one log per sweep, rows numbered
from 0 without gaps), so the study lives in the same database as the runs, SQLite or
PostgreSQL, under the service's own Alembic migrations, and goes with its sweep when the
sweep is deleted. (Optuna's ``RDBStorage`` would version its tables in an
``alembic_version`` table of its own, the very table the service's migrations own.)

Imported by the sweep driver only: it imports Optuna.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from optuna.storages.journal import BaseJournalBackend
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session, sessionmaker

from server.store.db import transaction
from server.store.models import SweepJournalRow, SweepRow


class SweepJournal(BaseJournalBackend):
    """The journal of sweep ``sweep_id``'s study."""

    def __init__(self, sessions: sessionmaker[Session], sweep_id: str):
        self.sessions = sessions
        self.sweep_id = sweep_id
        self._pending: list[dict[str, Any]] | None = None
        self._stored = 0
        """Logs in the database when the batch began."""

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Keeps what is appended inside the block (e.g. a trial asked for and each of its
        values, which Optuna appends one by one) and stores it in one transaction at the
        end: after a crash either all of it is in the journal or none of it. Reads inside
        the block see it already. On an error inside the block nothing is stored (the
        storage that read the pending logs must then be dropped)."""
        self._stored = self._count()
        self._pending = []
        try:
            yield
            pending = self._pending
        finally:
            self._pending = None
        self._append(pending)

    def _count(self) -> int:
        with self.sessions() as session:
            last = session.scalar(
                select(func.max(SweepJournalRow.number)).where(
                    SweepJournalRow.sweep_id == self.sweep_id
                )
            )
        return 0 if last is None else last + 1

    def read_logs(self, log_number_from: int) -> Iterable[dict[str, Any]]:
        rows = self._read(log_number_from)
        if self._pending is not None:
            first = max(0, log_number_from - self._stored)
            rows.extend(self._pending[first:])
        return rows

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        if self._pending is not None:
            self._pending.extend(logs)
        else:
            self._append(logs)

    def _read(self, log_number_from: int) -> list[dict[str, Any]]:
        with self.sessions() as session:
            rows: list[dict[str, Any]] = list(
                session.scalars(
                    select(SweepJournalRow.log)
                    .where(
                        SweepJournalRow.sweep_id == self.sweep_id,
                        SweepJournalRow.number >= log_number_from,
                    )
                    .order_by(SweepJournalRow.number)
                ).all()
            )
        return rows

    def _append(self, logs: list[dict[str, Any]]) -> None:
        """Appends ``logs`` in one transaction; the sweep's row is locked meanwhile, so two
        writers never take the same numbers."""
        if not logs:
            return
        with transaction(self.sessions) as session:
            session.get(SweepRow, self.sweep_id, with_for_update=True)
            last = session.scalar(
                select(func.max(SweepJournalRow.number)).where(
                    SweepJournalRow.sweep_id == self.sweep_id
                )
            )
            first = 0 if last is None else last + 1
            session.execute(
                insert(SweepJournalRow),
                [
                    {"sweep_id": self.sweep_id, "number": first + i, "log": log}
                    for i, log in enumerate(logs)
                ],
            )
