"""Storing a run's metrics: the points, their ``metrics`` events, the per-key counts and
the rollups that ``metrics_query`` reads, in the caller's transaction.

A step at or below the newest stored step (``runs.steps``) is skipped: a run that resumed
from an older checkpoint repeats steps it had stored, and a retried report is stored once.
Progress service events are throttled to one per run every ``PROGRESS_EVERY_S``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import insert, select, text
from sqlalchemy.orm import Session

from server import values
from server.store.db import dialect
from server.store.models import EventRow, MetricKeyRow, MetricRow, RunRow
from server.store.service_events import append_service_event, run_progress

ROLLUP_SIZES = (8, 64, 512, 4096)
"""Point counts summarised by the rollup levels (see ``metrics_query``)."""

PROGRESS_EVERY_S = 1.0
"""At most one ``progress`` service event per run in this long (per writing process)."""

MetricPoint = tuple[int, float, Mapping[str, float]]
"""One step's metrics: ``(step, wall_time, {key: value})``."""

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

_UPDATE_COUNT = text("UPDATE metric_keys SET count = :c WHERE run_id = :r AND key = :k")

_progress_at: dict[str, float] = {}
"""Per run, when this process last wrote its ``progress`` event (monotonic)."""


def store_metrics(session: Session, run: RunRow, batch: Sequence[MetricPoint]) -> int:
    """Stores ``batch`` in the caller's transaction, the run's row locked (see
    ``run_events.lock_run``), each step with its ``metrics`` event; returns how many steps
    were stored (see the module doc for the ones skipped)."""
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
                merge_rollup(rollups, run_id, key, size, index // size, (step, wall_time), stored)
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
    session.execute(_UPSERT_ROLLUPS[dialect(session)], list(rollups.values()))
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
    if now - _progress_at.get(run_id, -math.inf) >= PROGRESS_EVERY_S:
        _progress_at[run_id] = now
        append_service_event(session, run_id, "progress", run_progress(run))
    return len(events)


def merge_rollup(
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
