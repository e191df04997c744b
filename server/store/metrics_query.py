"""Reading metric series, downsampled to at most ``max_points`` per key.

Points are grouped into step buckets of equal width; a bucket reports its last point's step
and value and the minimum and maximum of everything merged into it, NaN-propagating (like
``numpy.min``): a NaN anywhere in a bucket makes its min and max NaN, so neither a spike nor
a NaN is ever hidden by downsampling.

Reading every raw point is too slow for long runs (a million points is ~0.5 s in SQLite), so
the store keeps rollups: summaries of 8, 64, 512 and 4096 consecutive points per key. A read
takes the coarsest level that still has at least ``max_points`` summaries after
``after_step`` (or the raw points when there are few), plus the raw points of the partial
chunk at the start, and merges those into buckets; at most ``8 * max_points`` rows are read
per key. A summary is assigned to a bucket by its last step.

A read runs in one snapshot of the database (``snapshot``) with the run's ``last_seq``
(``last_seq``): a run's metrics and their events are written in one transaction, so the
series hold exactly the metrics of the events up to that seq, and following the run's
stream from it brings the rest, none twice.

Each output point carries the wall time of its (last) point: raw points and rollups both
carry it (a rollup the wall time of its last point), so a read is one query per level and no
per-point lookup; only a rollup stored before migration 0007 whose point is gone has none,
and those few are looked up by step.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, Select, bindparam, select, text

from server import values
from server.store.metric_ingest import ROLLUP_SIZES
from server.store.models import EventRow, MetricKeyRow

_RAW = text(
    "SELECT step, step, value, value, value, value IS NULL, wall_time FROM metrics "
    "WHERE run_id = :run AND key = :key AND step > :after AND step < :before ORDER BY step"
)
_ROLLUP = text(
    "SELECT first_step, last_step, last_value, min_value, max_value, nans, last_wall_time "
    "FROM metric_rollups "
    "WHERE run_id = :run AND key = :key AND size = :size AND first_step > :after "
    "ORDER BY chunk"
)
# Each an index seek: MIN and MAX in one statement would scan every point. Written as
# ORDER BY ... LIMIT 1 rather than MIN/MAX: PostgreSQL then walks the primary key whatever
# its statistics say (on a table without them, e.g. just after a bulk insert, it planned
# MIN(step) as a scan of the key's every point: 44 ms instead of 0.5 ms at 100k points).
_FIRST_AFTER = text(
    "SELECT step FROM metrics WHERE run_id = :run AND key = :key AND step > :after "
    "ORDER BY step LIMIT 1"
)
_LAST = text(
    "SELECT step FROM metrics WHERE run_id = :run AND key = :key ORDER BY step DESC LIMIT 1"
)
_FIRST = text("SELECT step FROM metrics WHERE run_id = :run AND key = :key ORDER BY step LIMIT 1")
_STORED = text("SELECT count FROM metric_keys WHERE run_id = :run AND key = :key")
_WALL_TIME_CHUNK = 500
"""Steps per wall-time lookup (SQLite limits a statement's parameters)."""
# Built once (a text() per call costs more than the lookup: its parameters are parsed by
# SQLAlchemy and the driver each time): SQLite expands the list into its parameters,
# PostgreSQL takes it as one array, joined as a table of steps: with ``step = ANY(:steps)``
# a PostgreSQL without statistics on ``metrics`` read every point of the key and compared
# each with the whole array (500 ms for 1,563 steps of 100k points).
_WALL_TIMES = {
    "sqlite": text(
        "SELECT step, wall_time FROM metrics WHERE run_id = :run AND key = :key AND step IN :steps"
    ).bindparams(bindparam("steps", expanding=True)),
    "postgresql": text(
        "SELECT m.step, m.wall_time FROM unnest(CAST(:steps AS BIGINT[])) AS s(step) "
        "JOIN metrics AS m ON m.run_id = :run AND m.key = :key AND m.step = s.step"
    ),
}
# Every point of several keys in one statement (a page's first read: one statement instead
# of five per key). PostgreSQL joins the keys as a table, one primary-key range each.
_RAW_KEYS = {
    "sqlite": text(
        "SELECT key, step, value, wall_time FROM metrics WHERE run_id = :run AND key IN :keys "
        "ORDER BY key, step"
    ).bindparams(bindparam("keys", expanding=True)),
    "postgresql": text(
        "SELECT m.key, m.step, m.value, m.wall_time FROM unnest(CAST(:keys AS TEXT[])) AS k(key) "
        "JOIN metrics AS m ON m.run_id = :run AND m.key = k.key ORDER BY m.key, m.step"
    ),
}
_LAST_SEQ = text("SELECT last_seq FROM runs WHERE id = :run")
_COUNT_AFTER = text(
    "SELECT COUNT(*) FROM metrics WHERE run_id = :run AND key = :key AND step > :after"
)


@dataclass
class Series:
    step: list[int] = field(default_factory=list)
    wall_time: list[float] = field(default_factory=list)
    value: list[values.JsonFloat] = field(default_factory=list)
    min: list[values.JsonFloat] = field(default_factory=list)
    max: list[values.JsonFloat] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[Any]]:
        return {
            "step": self.step,
            "wall_time": self.wall_time,
            "value": self.value,
            "min": self.min,
            "max": self.max,
        }


@contextmanager
def snapshot(engine: Engine) -> Iterator[Connection]:
    """A connection whose reads all see one snapshot of the database: a SQLite read
    transaction is one (WAL); PostgreSQL's READ COMMITTED takes a snapshot per statement,
    so the transaction is REPEATABLE READ there (read-only: it never fails to serialize)."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            yield conn


def last_seq(conn: Connection, run_id: str) -> int:
    """The seq of the run's newest event (0 for a run that is gone)."""
    return int(conn.execute(_LAST_SEQ, {"run": run_id}).scalar() or 0)


def phase_at(conn: Connection, run_id: str, seq: int) -> dict[str, Any] | None:
    """The payload (``{"phase", "since"}``) of the run's newest ``phase`` event at or
    before ``seq``, or None: the phase its process was in when the metrics were read."""
    row = conn.execute(phase_query(run_id, seq)).first()
    return None if row is None else dict(row[0])


def phase_query(run_id: str, seq: int) -> Select[tuple[dict[str, Any]]]:
    """``phase_at``'s statement: a seek in the index ``ix_events_run_type_seq`` (a run that
    never reported a phase would otherwise have its whole stream scanned)."""
    return (
        select(EventRow.payload)
        .where(EventRow.run_id == run_id, EventRow.type == "phase", EventRow.seq <= seq)
        .order_by(EventRow.seq.desc())
        .limit(1)
    )


def metric_counts(conn: Connection, run_id: str) -> dict[str, int]:
    """The run's keys, in order, with how many points each has stored."""
    rows = conn.execute(
        select(MetricKeyRow.key, MetricKeyRow.count)
        .where(MetricKeyRow.run_id == run_id)
        .order_by(MetricKeyRow.key)
    )
    return {key: int(count) for key, count in rows.tuples()}


def read_many(
    conn: Connection, run_id: str, counts: dict[str, int], after_step: int, max_points: int
) -> dict[str, Series]:
    """``read_series`` of each key of ``counts`` (from ``metric_counts``). A whole-history
    read (``after_step`` -1) of the keys read raw (``_rollup_size`` None) is one statement
    for all of them; the others are read one by one."""
    out: dict[str, Series] = {}
    whole = after_step < 0
    raw = [k for k, n in counts.items() if whole and _rollup_size(n, max_points) is None]
    if raw:
        rows = conn.execute(_RAW_KEYS[conn.dialect.name], {"run": run_id, "keys": raw})
        for key, points in itertools.groupby(rows.tuples(), key=lambda row: row[0]):
            summaries = [(s, s, v, v, v, v is None, w) for _, s, v, w in points]
            out[key] = _bucket(summaries, summaries[0][0], summaries[-1][1], max_points)
    for key in counts.keys() - set(raw):
        out[key] = read_series(conn, run_id, key, after_step, max_points)
    return {key: out.get(key, Series()) for key in counts}


def read_series(
    conn: Connection, run_id: str, key: str, after_step: int, max_points: int
) -> Series:
    """One key's points with step > ``after_step``, at most ``max_points`` of them."""
    params = {"run": run_id, "key": key, "after": after_step}
    lo = conn.execute(_FIRST_AFTER, params).scalar()
    if lo is None:
        return Series()
    hi = int(conn.execute(_LAST, params).scalar_one())
    if conn.execute(_FIRST, params).scalar() == lo:  # every point: the stored count
        count = int(conn.execute(_STORED, params).scalar_one())
    else:
        count = int(conn.execute(_COUNT_AFTER, params).scalar_one())
    lo = int(lo)
    before = hi + 1
    rows: list[tuple[Any, ...]] = []
    size = _rollup_size(count, max_points)
    if size is not None:
        rows = list(conn.execute(_ROLLUP, {**params, "size": size}).all())  # one fetch
        before = rows[0][0] if rows else before
    raw = list(conn.execute(_RAW, {**params, "before": before}).all())
    out = _bucket(raw + rows, lo, hi, max_points)
    missing = [step for step, wall in zip(out.step, out.wall_time, strict=True) if wall is None]
    if missing:
        found = dict(zip(missing, _wall_times(conn, run_id, key, missing), strict=True))
        pairs = zip(out.step, out.wall_time, strict=True)
        out.wall_time = [found[s] if w is None else w for s, w in pairs]
    return out


def _wall_times(conn: Connection, run_id: str, key: str, steps: list[int]) -> list[float]:
    """The wall time of each of ``steps`` (points of ``key`` that exist)."""
    found: dict[int, float] = {}
    dialect = conn.dialect.name
    chunk_size = _WALL_TIME_CHUNK if dialect == "sqlite" else max(1, len(steps))
    for start in range(0, len(steps), chunk_size):
        chunk = steps[start : start + chunk_size]
        params = {"run": run_id, "key": key, "steps": chunk}
        for step, wall in conn.execute(_WALL_TIMES[dialect], params).tuples().all():
            found[int(step)] = float(wall)
    return [found[step] for step in steps]


def _rollup_size(count: int, max_points: int) -> int | None:
    """The coarsest rollup with at least ``max_points`` summaries, if raw points would be
    more than ``ROLLUP_SIZES[0]`` per output point."""
    if count <= ROLLUP_SIZES[0] * max_points:
        return None
    usable = [size for size in ROLLUP_SIZES if count // size >= max_points]
    return max(usable) if usable else None


def _bucket(rows: list[tuple[Any, ...]], lo: int, hi: int, max_points: int) -> Series:
    """Merges ``(first_step, last_step, last, min, max, nans, last_wall_time)`` rows, in step
    order, into at most ``max_points`` equal-width step buckets."""
    out = Series()
    if len(rows) <= max_points:
        for _, step, last, low, high, nans, wall in rows:
            _emit(out, [None, step, last, low, high, nans, wall])
        return out
    width = math.ceil((hi - lo + 1) / max_points)
    current = None
    for _, step, last, low, high, nans, wall in rows:
        bucket = (step - lo) // width
        if current is None or bucket != current[0]:
            if current is not None:
                _emit(out, current)
            current = [bucket, step, last, low, high, nans, wall]
            continue
        current[1], current[2], current[6] = step, last, wall
        current[3] = (
            low if current[3] is None else (current[3] if low is None else min(current[3], low))
        )
        current[4] = (
            high if current[4] is None else (current[4] if high is None else max(current[4], high))
        )
        current[5] += nans
    if current is not None:
        _emit(out, current)
    return out


def _emit(out: Series, bucket: list[Any]) -> None:
    _, step, last, low, high, nans, wall = bucket
    encoded = values.encode(last)
    out.step.append(step)
    out.wall_time.append(wall)
    out.value.append(encoded)
    # A raw point is its own min and max (the same object): encoded once.
    out.min.append("NaN" if nans else encoded if low is last else values.encode(low))
    out.max.append("NaN" if nans else encoded if high is last else values.encode(high))


def all_points(engine: Engine, run_id: str) -> Iterator[tuple[int, float, str, float | None]]:
    """Every stored point of the run as ``(step, wall_time, key, value)``, by step then key,
    streamed from one connection (``value`` as stored: None for a NaN on SQLite)."""
    with engine.connect() as conn:
        yield from conn.execute(
            text(
                "SELECT step, wall_time, key, value FROM metrics WHERE run_id = :r "
                "ORDER BY step, key"
            ),
            {"r": run_id},
        ).tuples()
