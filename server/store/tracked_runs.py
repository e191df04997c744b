"""Tracked runs: runs trained by a script outside the service (``nnx_ppo.track``).

A tracked run is created ``running`` and ``external`` with a run token (``create``); the
script reports through the same per-run-token path as a remote run process
(``run_reports.store_batch`` and ``heartbeat``) and ends it itself (``finish``). No
worker ever claims it or recovers it. A script that dies stops heartbeating: the API's
crash watch (``crash_silent``) moves a tracked run silent for longer than the timeout to
``crashed``.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select

from server.store.db import transaction
from server.store.models import RunRow
from server.store.run_events import lock_run
from server.store.run_reports import token_hash
from server.store.run_status import RunStatus
from server.store.run_store import RunStore
from server.store.run_transitions import apply_transition

OUTCOMES = {
    RunStatus.SUCCEEDED: "finish",
    RunStatus.FAILED: "fail",
    RunStatus.CANCELLED: "cancel",
}
"""The statuses a script may end its tracked run with, and their transitions."""


class FinishRefused(Exception):
    """A finish that the run's status or token does not allow (the message says why)."""


def create(
    store: RunStore,
    *,
    name: str,
    spec: Mapping[str, Any],
    kind: str,
    tags: Sequence[str],
    notes: str,
    total_steps: int,
) -> tuple[RunRow, str]:
    """A new tracked run, ``running`` from the start, and its run token."""
    token = secrets.token_urlsafe(32)
    run = store.create(
        spec,
        kind=kind,
        name=name,
        tags=tags,
        notes=notes,
        total_steps=total_steps,
        tracked_token_hash=token_hash(token),
    )
    return run, token


def finish(
    store: RunStore, run_id: str, token: str, outcome: RunStatus, error: str | None
) -> RunRow:
    """Ends the tracked run with ``outcome`` (one of ``OUTCOMES``). Idempotent: a retried
    finish of a run already in that status changes nothing.

    Raises:
        FinishRefused: Not this run's token, not a tracked run, or a run already ended
            otherwise (``crashed``, say).
    """
    with transaction(store.sessions) as session:
        run = lock_run(session, run_id)
        if run.token_hash is None or not hmac.compare_digest(run.token_hash, token_hash(token)):
            raise FinishRefused(f"run {run_id}: not its run token")
        if not run.external:
            raise FinishRefused(f"run {run_id} is not a tracked run")
        if run.status == outcome.value:
            return run
        if run.status != RunStatus.RUNNING.value:
            raise FinishRefused(f"run {run_id} is {run.status}: it cannot end {outcome.value}")
        if outcome is RunStatus.CANCELLED and run.prune_reason is not None:
            apply_transition(session, run, "prune", run.prune_reason)
        else:
            apply_transition(session, run, OUTCOMES[outcome], error)
        return run


def crash_silent(store: RunStore, timeout: float, not_before: float) -> list[str]:
    """Tracked runs whose script has not reported (heartbeats included) for ``timeout``
    seconds become ``crashed``; silence before ``not_before`` (when the watch started:
    the API itself may have been down) does not count. Returns their ids."""
    now = time.time()
    cutoff = now - timeout
    if not_before > cutoff:
        return []
    crashed = []
    with transaction(store.sessions) as session:
        silent = session.scalars(
            select(RunRow)
            .where(
                RunRow.external.is_(True),
                RunRow.status == RunStatus.RUNNING.value,
                RunRow.reported_at < cutoff,
            )
            .order_by(RunRow.id)  # one lock order for every locker of several runs
            .with_for_update()
        ).all()
        for run in silent:
            silence = now - (run.reported_at or 0.0)
            message = f"its script stopped reporting: no heartbeat for {silence:.0f} s"
            apply_transition(session, run, "crash", message)
            crashed.append(run.id)
    return crashed
