"""Rewinding a run's stored metrics to the checkpoint it resumes from.

A run process killed after storing a step's metrics but before finishing that step's
checkpoint resumes from an older checkpoint and trains those steps again: the points stored
after the checkpoint describe a state that no longer exists. Left in place, the run would
show progress its parameters never reach if it stops early (cancelled, pruned, failed), and
the repeated steps would be skipped (``metric_ingest``), so its curves would mix two
trainings. Rewinding deletes those points, rebuilds the run's rollups and per-key counts
from the points kept, and sets ``runs.steps`` and ``latest_metrics`` as of the checkpoint.
The stream keeps its ``metrics`` events (it is a log, gapless by ``seq``); a ``rewind``
event tells its followers to drop their points after ``step`` (see ``run_events``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from server import values
from server.store.metric_ingest import ROLLUP_SIZES, merge_rollup
from server.store.models import MetricKeyRow, MetricRollupRow, MetricRow, RunRow
from server.store.service_events import append_service_event, run_progress


def rewind_metrics(session: Session, run: RunRow, step: int) -> int | None:
    """Deletes the run's points after ``step`` in the caller's transaction, its row locked
    (``run_events.lock_run``); returns the newest step stored before, or None where none
    was after ``step`` (nothing changes)."""
    newest = int(run.steps)
    if step >= newest:
        return None
    run_id = run.id
    session.execute(delete(MetricRow).where(MetricRow.run_id == run_id, MetricRow.step > step))
    session.execute(delete(MetricRollupRow).where(MetricRollupRow.run_id == run_id))
    session.execute(delete(MetricKeyRow).where(MetricKeyRow.run_id == run_id))
    kept = session.execute(
        select(MetricRow.key, MetricRow.step, MetricRow.wall_time, MetricRow.value)
        .where(MetricRow.run_id == run_id)
        .order_by(MetricRow.key, MetricRow.step)
    ).all()
    counts: dict[str, int] = {}
    latest: dict[str, Any] = {}
    rollups: dict[tuple[str, int, int], dict[str, Any]] = {}
    for key, at, wall_time, value in kept:
        index = counts.get(key, 0)
        counts[key] = index + 1
        latest[key] = values.encode(value)
        for size in ROLLUP_SIZES:
            merge_rollup(rollups, run_id, key, size, index // size, (at, wall_time), value)
    if rollups:
        session.execute(insert(MetricRollupRow), list(rollups.values()))
    if counts:
        session.execute(
            insert(MetricKeyRow),
            [{"run_id": run_id, "key": key, "count": count} for key, count in counts.items()],
        )
    run.steps = step
    run.latest_metrics = latest
    append_service_event(session, run_id, "progress", run_progress(run))
    return newest
