"""What remote run processes report over HTTP, stored through the same path as the local
ones (``run_events.record_items``), plus the run tokens that authorize them.

A run token is issued when a run is handed to a remote executor (its SHA-256 is stored on
the run's row, replacing the previous attempt's): it is valid for that run alone, while the
run is ``running``. A report batch carries a client-side ``seq`` (from 1 per attempt); a
batch at or below the newest stored one is a retry and is skipped whole, and metrics are
skipped by step as well (``metric_ingest``): a report retried after a
timeout or an API restart is stored once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Sequence

from sqlalchemy import update

from server.store.db import transaction
from server.store.models import RunRow
from server.store.run_events import REPORT_KINDS as REPORT_KINDS
from server.store.run_events import ReportItem as ReportItem
from server.store.run_events import lock_run, record_items
from server.store.run_status import RunStatus
from server.store.run_store import RunStore


class TokenRefused(Exception):
    """A run token that is not this run's current one, or a run that is not running."""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue_token(store: RunStore, run_id: str) -> str:
    """A fresh run token for the run's current attempt (the previous one stops working)."""
    token = secrets.token_urlsafe(32)
    with transaction(store.sessions) as session:
        session.execute(
            update(RunRow)
            .where(RunRow.id == run_id)
            .values(token_hash=token_hash(token), report_seq=0, reported_at=time.time(), node=None)
        )
    return token


def token_valid(run: RunRow, token: str | None) -> bool:
    return (
        token is not None
        and run.token_hash is not None
        and hmac.compare_digest(run.token_hash, token_hash(token))
        and run.status == RunStatus.RUNNING.value
    )


def _authorized(run: RunRow, token: str) -> None:
    if not token_valid(run, token):
        raise TokenRefused(f"run {run.id}: not a current run token")


def store_batch(
    store: RunStore, run_id: str, token: str, seq: int, items: Sequence[ReportItem]
) -> bool:
    """Stores a batch in one transaction, in order (``run_events.record_items``); False
    when it was stored before."""
    with transaction(store.sessions) as session:
        run = lock_run(session, run_id)
        _authorized(run, token)
        run.reported_at = time.time()
        if seq <= run.report_seq:
            return False
        record_items(session, run, items)
        run.report_seq = seq
        return True


def heartbeat(store: RunStore, run_id: str, token: str, node: str | None) -> bool:
    """Records that the run's process is alive (and where); returns whether it is asked to
    stop (cancelled or pruned)."""
    with transaction(store.sessions) as session:
        run = lock_run(session, run_id)
        _authorized(run, token)
        run.reported_at = time.time()
        if node is not None:
            run.node = node
        return bool(run.cancel_requested)


def set_node(store: RunStore, run_id: str, node: str | None) -> None:
    with transaction(store.sessions) as session:
        session.execute(update(RunRow).where(RunRow.id == run_id).values(node=node))
