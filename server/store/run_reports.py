"""What remote run processes report over HTTP, stored with the same transactions as the
local path (``RunStore``), plus the run tokens that authorize them.

A run token is issued when a run is handed to a remote executor (its SHA-256 is stored on
the run's row, replacing the previous attempt's): it is valid for that run alone, while the
run is ``running``. A report batch carries a client-side ``seq`` (from 1 per attempt); a
batch at or below the newest stored one is a retry and is skipped whole, and metrics are
skipped by step as well (``RunStore.record_metrics_batch``): a report retried after a
timeout or an API restart is stored once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import update

from server import values
from server.store.db import transaction
from server.store.models import RunRow
from server.store.run_status import RunStatus
from server.store.run_store import RunStore, phase_payload

REPORT_KINDS = ("metrics", "log", "phase", "checkpoint", "video")


class TokenRefused(Exception):
    """A run token that is not this run's current one, or a run that is not running."""


@dataclass(frozen=True)
class ReportItem:
    """One report of a batch: ``kind`` is one of ``REPORT_KINDS``."""

    kind: str
    payload: dict[str, Any]


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
    """Stores a batch in one transaction, in order; False when it was stored before."""
    with transaction(store.sessions) as session:
        run = store._get(session, run_id)
        _authorized(run, token)
        run.reported_at = time.time()
        if seq <= run.report_seq:
            return False
        metrics: list[tuple[int, float, dict[str, float]]] = []
        for item in items:
            if item.kind == "metrics":
                p = item.payload
                decoded = {k: values.decode(v) for k, v in p["values"].items()}
                metrics.append((int(p["step"]), float(p["wall_time"]), decoded))
                continue
            if metrics:
                store._store_metrics(session, run, metrics)
                metrics = []
            p = item.payload
            if item.kind == "log":
                store._append(session, run, "log", {"line": p["line"]})
            elif item.kind == "phase":
                store._append(session, run, "phase", phase_payload(p["phase"], p["since"]))
            elif item.kind == "checkpoint":
                store._append(session, run, "checkpoint", {"checkpoint": p})
            elif item.kind == "video":
                store._store_video(
                    session,
                    run,
                    int(p["step"]),
                    p["filename"],
                    values.decode(p["episode_reward"]),
                    int(p["episode_length"]),
                )
        if metrics:
            store._store_metrics(session, run, metrics)
        run.report_seq = seq
        return True


def heartbeat(store: RunStore, run_id: str, token: str, node: str | None) -> bool:
    """Records that the run's process is alive (and where); returns whether it is asked to
    stop (cancelled or pruned)."""
    with transaction(store.sessions) as session:
        run = store._get(session, run_id)
        _authorized(run, token)
        run.reported_at = time.time()
        if node is not None:
            run.node = node
        return bool(run.cancel_requested)


def set_node(store: RunStore, run_id: str, node: str | None) -> None:
    with transaction(store.sessions) as session:
        session.execute(update(RunRow).where(RunRow.id == run_id).values(node=node))
