"""Rewinding a run's stored metrics to the checkpoint it resumes from.

A run process killed after storing a step's metrics but before finishing that step's
checkpoint resumes from an older checkpoint and trains those steps again: the points stored
after the checkpoint describe a state that no longer exists. Left in place, the run would
show progress its parameters never reach if it stops early (cancelled, pruned, failed), and
the repeated steps would be skipped (``metric_ingest``), so its curves would mix two
trainings. Rewinding deletes those points, brings the run's rollups and per-key counts back to
the points kept, and sets ``runs.steps`` and ``latest_metrics`` as of the checkpoint.
The stream keeps its ``metrics`` events (it is a log, gapless by ``seq``); a ``rewind``
event tells its followers to drop their points after ``step`` (see ``run_events``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from server import values
from server.store.metric_ingest import ROLLUP_SIZES, merge_rollup
from server.store.models import MetricKeyRow, MetricRollupRow, MetricRow, RunRow
from server.store.service_events import append_service_event, run_progress


def rewind_metrics(session: Session, run: RunRow, step: int) -> int | None:
    """Deletes the run's points after ``step`` in the caller's transaction, its row locked
    (``run_events.lock_run``); returns the newest step stored before, or None where none
    was after ``step`` (nothing changes).

    Per key, only the rollup chunks past the points kept change: those wholly past are
    deleted and the one cut in two is summarised again from its kept points (at most
    ``ROLLUP_SIZES[-1] - 1`` of them), so the cost does not grow with the run's length."""
    newest = int(run.steps)
    if step >= newest:
        return None
    run_id = run.id
    kept_counts = dict(
        session.execute(
            select(MetricRow.key, func.count())
            .where(MetricRow.run_id == run_id, MetricRow.step <= step)
            .group_by(MetricRow.key)
        )
        .tuples()
        .all()
    )
    session.execute(delete(MetricRow).where(MetricRow.run_id == run_id, MetricRow.step > step))
    session.execute(delete(MetricKeyRow).where(MetricKeyRow.run_id == run_id))
    latest: dict[str, Any] = {}
    rollups: dict[tuple[str, int, int], dict[str, Any]] = {}
    for key, kept in kept_counts.items():
        for size in ROLLUP_SIZES:  # chunks from the one holding point ``kept`` on
            session.execute(
                delete(MetricRollupRow).where(
                    MetricRollupRow.run_id == run_id,
                    MetricRollupRow.key == key,
                    MetricRollupRow.size == size,
                    MetricRollupRow.chunk >= kept // size,
                )
            )
        tail = max(1, kept % ROLLUP_SIZES[-1])  # the largest cut chunk's points, or the last
        points = session.execute(
            select(MetricRow.step, MetricRow.wall_time, MetricRow.value)
            .where(MetricRow.run_id == run_id, MetricRow.key == key)
            .order_by(MetricRow.step.desc())
            .limit(tail)
        ).all()[::-1]
        latest[key] = values.encode(points[-1][2])
        for index, (at, wall_time, value) in enumerate(points, start=kept - len(points)):
            for size in ROLLUP_SIZES:
                if index >= kept // size * size:  # in the chunk cut in two
                    merge_rollup(rollups, run_id, key, size, index // size, (at, wall_time), value)
    session.execute(
        delete(MetricRollupRow).where(
            MetricRollupRow.run_id == run_id, MetricRollupRow.key.not_in(list(kept_counts))
        )
    )
    if rollups:
        session.execute(insert(MetricRollupRow), list(rollups.values()))
    if kept_counts:
        session.execute(
            insert(MetricKeyRow),
            [{"run_id": run_id, "key": key, "count": n} for key, n in kept_counts.items()],
        )
    run.steps = step
    run.latest_metrics = latest
    append_service_event(session, run_id, "progress", run_progress(run))
    return newest
