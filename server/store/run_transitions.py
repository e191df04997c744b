"""A run's status changes and the claim queue.

Status changes happen only in ``apply_transition`` (the table is
``run_status.TRANSITIONS``); each appends a ``status`` event to the run's stream and a
``status`` service event in the same transaction, so the streams and the row never
disagree.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from server.store.db import transaction
from server.store.models import RunRow
from server.store.run_events import append_event, lock_run
from server.store.run_status import TERMINAL, TRANSITIONS, RunStatus, TransitionError
from server.store.service_events import append_service_event, run_progress


def apply_transition(
    session: Session, run: RunRow, name: str, error: str | None, **fields: Any
) -> None:
    """Applies transition ``name`` to ``run`` (its row locked: ``run_events.lock_run``) in
    the caller's transaction, with its events; ``fields`` are set on the row.

    Raises:
        TransitionError: If the run's status is not one the transition starts from.
    """
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
    append_event(session, run, "status", {"status": target.value, "error": error})
    append_service_event(
        session, run.id, "status", {"status": target.value, "error": error, **run_progress(run)}
    )


class RunTransitions:
    """``RunStore``'s status changes and claim queue, each in one transaction."""

    sessions: sessionmaker[Session]

    def transition(self, run_id: str, name: str, error: str | None = None, **fields: Any) -> RunRow:
        """Applies transition ``name`` (see ``run_status.TRANSITIONS``) atomically, with its
        status event; ``fields`` are set on the row in the same transaction."""
        with transaction(self.sessions) as session:
            run = lock_run(session, run_id)
            apply_transition(session, run, name, error, **fields)
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
            query = select(RunRow.id, wanted).where(
                RunRow.status == RunStatus.QUEUED.value, RunRow.external.is_(False)
            )
            if total is not None:
                query = query.where(wanted <= total)
            first = session.execute(
                query.order_by(RunRow.queued_at, RunRow.created_at)
                .limit(1)
                .with_for_update(skip_locked=True)
            ).first()
            if first is None or (free is not None and first[1] > free):
                return None
            run = lock_run(session, first[0])
            apply_transition(
                session,
                run,
                "start",
                None,
                worker_id=worker_id,
                started_at=time.time(),
                attempts=run.attempts + 1,
            )
            return run

    def request_cancel(self, run_id: str) -> RunRow:
        """A queued run is cancelled at once; a running one is asked to stop (its process
        checks ``cancel_requested`` after each iteration); a finished one is left as is."""
        with transaction(self.sessions) as session:
            run = lock_run(session, run_id)
            if run.status == RunStatus.QUEUED.value:
                apply_transition(session, run, "cancel", None)
            elif run.status in (RunStatus.RUNNING.value, RunStatus.INTERRUPTED.value):
                run.cancel_requested = True
            return run

    def request_prune(self, run_id: str, reason: str) -> bool:
        """Asks a running run to stop as ``pruned`` (with ``reason``); False if it is not
        running."""
        with transaction(self.sessions) as session:
            run = lock_run(session, run_id)
            if run.status != RunStatus.RUNNING.value:
                return False
            run.cancel_requested = True
            run.prune_reason = reason
            return True

    def end_stopped(self, run_id: str) -> RunRow:
        """The transition of a run that stopped because it was asked to: ``prune`` (with
        its reason) when its sweep's pruner asked, else ``cancel``."""
        with transaction(self.sessions) as session:
            run = lock_run(session, run_id)
            if run.prune_reason is not None:
                apply_transition(session, run, "prune", run.prune_reason)
            else:
                apply_transition(session, run, "cancel", None)
            return run

    def cancel_requested(self, run_id: str) -> bool:
        with self.sessions() as session:
            return bool(session.scalar(select(RunRow.cancel_requested).where(RunRow.id == run_id)))
