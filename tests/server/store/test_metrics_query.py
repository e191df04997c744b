"""Downsampled metric reads against a brute-force computation over the raw points, on a
real SQLite file and a real PostgreSQL database written through the store (which maintains
the rollups)."""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, text

from server.store.db import make_engine, make_sessionmaker, migrate
from server.store.metrics_query import (
    last_seq,
    metric_counts,
    phase_at,
    phase_query,
    read_many,
    read_series,
    snapshot,
)
from server.store.run_events import ReportItem
from server.store.run_store import RunStore


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunStore]:
    directory = tmp_path_factory.mktemp("metrics")
    if request.param == "sqlite":
        url = f"sqlite:///{directory / 'db.sqlite'}"
        migrate(url)
    else:
        url = request.getfixturevalue("postgres").database()
    engine = make_engine(url, durable=False)
    yield RunStore(make_sessionmaker(engine), directory / "runs")
    engine.dispose()


def _engine(store: RunStore) -> Engine:
    return store.sessions.kw["bind"]


def _wall(step: int) -> float:
    """The wall time the tests store with a step (epoch seconds)."""
    return 1.7e9 + step / 1000


def _new_run(store: RunStore, points: list[tuple[int, float]], key: str = "k") -> str:
    """A run with these points, stored as a run process does: one transaction per batch
    of steps (batches of 1, 7 and 500 to cover the rollup bookkeeping across batches)."""
    run = store.create({}, kind="ppo", name="m", tags=[], notes="", total_steps=1)
    entries = [(step, _wall(step), {key: value}) for step, value in points]
    i = 0
    for size in (1, 7, *[500] * len(entries)):
        if i >= len(entries):
            break
        assert store.record_metrics_batch(run.id, entries[i : i + size]) == len(
            entries[i : i + size]
        )
        i += size
    return run.id


def _decode(v: float | str) -> float:
    return float({"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}.get(v, v))  # type: ignore[arg-type]


def test_few_points_come_back_exactly(store: RunStore) -> None:
    points = [(10, 1.0), (20, float("nan")), (30, float("inf")), (40, -2.5)]
    run_id = _new_run(store, points)
    with _engine(store).connect() as conn:
        series = read_series(conn, run_id, "k", -1, 1000).as_dict()
    assert series["step"] == [10, 20, 30, 40]
    assert series["wall_time"] == [_wall(s) for s in (10, 20, 30, 40)]
    assert series["value"] == [1.0, "NaN", "Infinity", -2.5]
    assert series["min"] == series["max"] == series["value"]
    with _engine(store).connect() as conn:
        after = read_series(conn, run_id, "k", 20, 1000).as_dict()
    assert after["step"] == [30, 40]  # after_step is strictly greater


def _brute_force(points: list[tuple[int, float]], after: int, max_points: int) -> dict:
    """Equal-width step buckets over the raw points (NaN-propagating min/max)."""
    kept = [(s, v) for s, v in points if s > after]
    lo, hi = kept[0][0], kept[-1][0]
    width = math.ceil((hi - lo + 1) / max_points)
    buckets: dict[int, list[tuple[int, float]]] = {}
    for s, v in kept:
        buckets.setdefault((s - lo) // width, []).append((s, v))
    out: dict[str, list] = {"step": [], "wall_time": [], "value": [], "min": [], "max": []}
    for b in sorted(buckets):
        values = [v for _, v in buckets[b]]
        nan = any(math.isnan(v) for v in values)
        out["step"].append(buckets[b][-1][0])
        out["wall_time"].append(_wall(buckets[b][-1][0]))  # the bucket's last point's
        out["value"].append(values[-1])
        out["min"].append(math.nan if nan else min(values))
        out["max"].append(math.nan if nan else max(values))
    return out


def _same(a: list, b: list) -> bool:
    return all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b, strict=True))


def test_raw_downsampling_matches_brute_force(store: RunStore) -> None:
    rng = random.Random(0)
    points = [(160 * (i + 1), rng.gauss(0, 1)) for i in range(700)]
    points[123] = (points[123][0], 1e6)  # a spike
    points[456] = (points[456][0], float("nan"))
    run_id = _new_run(store, points)
    # At most 8 raw points per output point: the exact path (no rollups).
    for after, max_points in [(-1, 100), (160 * 50, 100), (-1, 90), (160 * 690, 3)]:
        with _engine(store).connect() as conn:
            got = read_series(conn, run_id, "k", after, max_points).as_dict()
        want = _brute_force(points, after, max_points)
        assert got["step"] == want["step"]
        assert got["wall_time"] == want["wall_time"]
        assert _same([_decode(v) for v in got["value"]], want["value"])
        assert _same([_decode(v) for v in got["min"]], want["min"])
        assert _same([_decode(v) for v in got["max"]], want["max"])
        assert len(got["step"]) <= max_points


def test_rollups_keep_spikes_nans_and_the_last_point(store: RunStore) -> None:
    rng = random.Random(1)
    points = [(10 * (i + 1), rng.uniform(-1, 1)) for i in range(20_000)]
    points[7_777] = (points[7_777][0], 50.0)
    points[12_345] = (points[12_345][0], float("nan"))
    points[15_000] = (points[15_000][0], -40.0)
    run_id = _new_run(store, points)
    for after, max_points in [(-1, 100), (-1, 1000), (10 * 3_333, 200)]:
        with _engine(store).connect() as conn:
            got = read_series(conn, run_id, "k", after, max_points).as_dict()
        kept = [(s, v) for s, v in points if s > after]
        assert 0 < len(got["step"]) <= max_points
        assert got["step"] == sorted(got["step"]) and got["step"][-1] == kept[-1][0]
        # Each bucket's wall time is its last point's (here a function of its step).
        assert got["wall_time"] == [_wall(s) for s in got["step"]]
        assert _decode(got["value"][-1]) == kept[-1][1]
        highs = [_decode(v) for v in got["max"] if v != "NaN"]
        lows = [_decode(v) for v in got["min"] if v != "NaN"]
        finite = [v for s, v in kept if not math.isnan(v)]
        assert max(highs) <= max(finite) and min(lows) >= min(finite)
        assert 50.0 in highs  # the spike survives in its bucket's max
        assert -40.0 in lows
        nan_buckets = [s for s, m in zip(got["step"], got["min"], strict=True) if m == "NaN"]
        assert len(nan_buckets) == 1 and nan_buckets[0] >= points[12_345][0]


def test_a_repeated_step_is_not_stored_twice(store: RunStore) -> None:
    run_id = _new_run(store, [(100, 1.0), (200, 2.0)])
    assert not store.record_metrics(run_id, 200, 0.0, {"k": 9.0})
    assert not store.record_metrics(run_id, 150, 0.0, {"k": 9.0})
    with _engine(store).connect() as conn:
        assert read_series(conn, run_id, "k", -1, 10).as_dict()["value"] == [1.0, 2.0]
    assert [e["type"] for e in store.events_after(run_id, 0)] == ["status", "metrics", "metrics"]


def _read_all(store: RunStore, run_id: str, key: str) -> list[dict[str, Any]]:
    with _engine(store).connect() as conn:
        return [
            read_series(conn, run_id, key, after, max_points).as_dict()
            for after, max_points in [(-1, 100), (-1, 1000), (-1, 20_000), (10 * 3_333, 200)]
        ]


def _rollups(store: RunStore, run_id: str) -> list[tuple[Any, ...]]:
    with _engine(store).connect() as conn:
        return [
            tuple(row)
            for row in conn.execute(
                text(
                    "SELECT key, size, chunk, first_step, last_step, last_value, min_value, "
                    "max_value, nans, last_wall_time FROM metric_rollups WHERE run_id = :r "
                    "ORDER BY key, size, chunk"
                ),
                {"r": run_id},
            )
        ]


def test_a_rewound_run_reads_as_if_it_had_never_trained_past_its_checkpoint(
    store: RunStore,
) -> None:
    """A run killed between storing step 90,000's metrics and finishing that checkpoint
    resumes from step 60,000 and trains again: the stored points after it go, rollups and
    counts included, and what the retraining stores reads exactly as a run that only
    ever trained that way."""
    rng = random.Random(2)
    lost = [(10 * (i + 1), rng.uniform(-1, 1)) for i in range(9_000)]
    lost[7_000] = (lost[7_000][0], 99.0)  # a spike after the checkpoint: it must go
    again = [(10 * (i + 1), rng.uniform(-1, 1)) for i in range(6_000, 10_000)]
    run_id = _new_run(store, lost)
    late = [(90_010, _wall(90_010), {"late": 1.0})]  # a key with points after it only
    assert store.record_metrics_batch(run_id, late) == 1
    store.record_items(run_id, [ReportItem("rewind", {"step": 60_000})])
    run = store.get(run_id)
    assert run.steps == 60_000
    assert run.latest_metrics == {"k": lost[5_999][1]}
    rewind = store.events_after(run_id, run.last_seq - 1)
    assert [(e["type"], e["step"], e["from_step"]) for e in rewind] == [("rewind", 60_000, 90_010)]
    for i in range(0, len(again), 50):  # in batches, as a run process reports
        batch = [(step, _wall(step), {"k": value}) for step, value in again[i : i + 50]]
        assert store.record_metrics_batch(run_id, batch) == len(batch)
    expected = _new_run(store, lost[:6_000] + again)
    assert _read_all(store, run_id, "k") == _read_all(store, expected, "k")
    assert _rollups(store, run_id) == _rollups(store, expected)
    assert store.get(run_id).latest_metrics == store.get(expected).latest_metrics
    with _engine(store).connect() as conn:
        assert read_series(conn, run_id, "late", -1, 10).as_dict()["step"] == []
        counts = conn.execute(
            text("SELECT key, count FROM metric_keys WHERE run_id = :r"), {"r": run_id}
        ).all()
    assert [tuple(c) for c in counts] == [("k", 10_000)]
    # Rewinding to where the run is, or past it, changes nothing and says nothing.
    seq = store.get(run_id).last_seq
    store.record_items(run_id, [ReportItem("rewind", {"step": 100_000})])
    store.record_items(run_id, [ReportItem("rewind", {"step": 200_000})])
    assert store.get(run_id).last_seq == seq and store.get(run_id).steps == 100_000
    # Back to the start (a run with no checkpoint that starts over): nothing is left.
    store.record_items(run_id, [ReportItem("rewind", {"step": 0})])
    assert (store.get(run_id).steps, store.get(run_id).latest_metrics) == (0, {})
    assert _rollups(store, run_id) == []
    with _engine(store).connect() as conn:
        assert metric_counts(conn, run_id) == {}
        assert read_series(conn, run_id, "k", -1, 10).as_dict()["step"] == []


def test_many_keys_read_at_once_equal_each_read_alone(store: RunStore) -> None:
    """``read_many`` (one statement for the keys read raw) against ``read_series`` per key:
    small and rollup-sized keys, NaNs and infinities, a key with one point, whole-history
    and after-step reads, every key or a few."""
    rng = random.Random(3)
    run = store.create({}, kind="ppo", name="many", tags=[], notes="", total_steps=1)
    small = {f"s{i:02d}": [float(i) for _ in range(40)] for i in range(30)}
    small["s07"][5], small["s08"][6] = float("nan"), float("-inf")
    big = {"big": [rng.gauss(0, 1) for _ in range(9_000)]}
    entries = []
    for i in range(9_000):
        step = 10 * (i + 1)
        point = {key: series[i] for key, series in {**small, **big}.items() if i < len(series)}
        entries.append((step, _wall(step), point))
    entries.append((100_000, _wall(100_000), {"once": 1.0}))
    for i in range(0, len(entries), 500):
        store.record_metrics_batch(run.id, entries[i : i + 500])
    with _engine(store).connect() as conn:
        counts = metric_counts(conn, run.id)
        assert counts["s00"] == 40 and counts["big"] == 9_000 and counts["once"] == 1
        for after, max_points in [(-1, 1000), (-1, 30), (-1, 1), (200, 1000), (50_000, 100)]:
            for keys in (counts, {k: counts[k] for k in ("once", "s08", "big")}):
                together = read_many(conn, run.id, keys, after, max_points)
                alone = {k: read_series(conn, run.id, k, after, max_points) for k in keys}
                assert list(together) == list(keys)
                assert {k: v.as_dict() for k, v in together.items()} == {
                    k: v.as_dict() for k, v in alone.items()
                }
        assert read_many(conn, run.id, {}, -1, 10) == {}


def test_unknown_key_and_empty_run(store: RunStore, tmp_path: Path) -> None:
    run_id = _new_run(store, [])
    with _engine(store).connect() as conn:
        assert read_series(conn, run_id, "nothing", -1, 10).as_dict()["step"] == []


def test_last_seq_and_the_series_are_read_in_one_snapshot(store: RunStore) -> None:
    """A batch committed while a read is under way (after its ``last_seq``, before its
    series) is in neither: following the stream after ``last_seq`` brings it, once. On
    PostgreSQL at READ COMMITTED the series would hold step 11 and the stream bring it
    again."""
    run_id = _new_run(store, [(step, float(step)) for step in range(1, 11)])
    engine = _engine(store)
    committed: list[int] = []

    def commit_a_batch_between(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.startswith("SELECT last_seq FROM runs") and not committed:
            batch = [(11, _wall(11), {"k": 11.0})]
            writer = threading.Thread(target=store.record_metrics_batch, args=(run_id, batch))
            writer.start()
            writer.join(30)
            committed.append(11)

    event.listen(engine, "after_cursor_execute", commit_a_batch_between)
    try:
        with snapshot(engine) as conn:
            seq = last_seq(conn, run_id)
            series = read_series(conn, run_id, "k", -1, 100)
    finally:
        event.remove(engine, "after_cursor_execute", commit_a_batch_between)
    assert committed == [11]
    assert series.step == list(range(1, 11))
    events = store.events_after(run_id, 0)
    # The events up to last_seq: the queued status and the ten metrics; after it, step 11.
    assert [e["step"] for e in events if e["type"] == "metrics" and e["seq"] <= seq] == series.step
    assert [e["step"] for e in events if e["seq"] > seq] == [11]
    assert seq == 11 and events[-1]["seq"] == 12


def test_rollups_carry_their_last_points_wall_time_and_old_rows_are_looked_up(
    store: RunStore,
) -> None:
    points = [(10 * (i + 1), float(i)) for i in range(9_000)]  # read through the 8-rollups
    run_id = _new_run(store, points)
    with _engine(store).begin() as conn:
        stored = conn.execute(
            text("SELECT last_step, last_wall_time FROM metric_rollups WHERE run_id = :r"),
            {"r": run_id},
        ).all()
        assert stored and all(wall == _wall(step) for step, wall in stored)
        with_walls = read_series(conn, run_id, "k", -1, 1000).as_dict()
        # A rollup from before migration 0007 without its wall time: looked up by step.
        conn.execute(
            text(
                "UPDATE metric_rollups SET last_wall_time = NULL "
                "WHERE run_id = :r AND chunk % 3 = 0"
            ),
            {"r": run_id},
        )
        without = read_series(conn, run_id, "k", -1, 1000).as_dict()
    assert len(with_walls["step"]) > 8 * 100  # many buckets came from rollups
    assert with_walls == without
    assert with_walls["wall_time"] == [_wall(s) for s in with_walls["step"]]


def test_migration_0007_fills_in_the_wall_time_of_stored_rollups(tmp_path: Path) -> None:
    from alembic import command
    from alembic.config import Config

    from server.store.db import MIGRATIONS_DIR

    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    engine = make_engine(url, durable=False)
    store = RunStore(make_sessionmaker(engine), tmp_path / "runs")
    run_id = _new_run(store, [(10 * (i + 1), 1.0) for i in range(100)])
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url)
    with engine.connect() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0006_ray_executor")  # as a database written before 0007
        connection.commit()
        command.upgrade(config, "head")
        connection.commit()
    with engine.connect() as conn:
        stored = conn.execute(
            text("SELECT last_step, last_wall_time FROM metric_rollups WHERE run_id = :r"),
            {"r": run_id},
        ).all()
    engine.dispose()
    assert len(stored) == 100 // 8 + 1 + 2 + 1 + 1  # the 8-, 64-, 512- and 4096-point chunks
    assert all(wall == _wall(step) for step, wall in stored)


def test_the_phase_lookup_seeks_an_index_instead_of_scanning_the_stream(tmp_path: Path) -> None:
    # Every metrics read returns the run's phase; a run with a long stream and no phase
    # event had its whole stream scanned (300 ms for 1M events): SQLite's plan must use the
    # index, and the answer must be the newest phase event at or before the seq.
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    engine = make_engine(url, durable=False)
    store = RunStore(make_sessionmaker(engine), tmp_path / "runs")
    run = store.create({}, kind="ppo", name="p", tags=[], notes="", total_steps=1)
    store.record_phase(run.id, "training", 1.0)
    store.record_metrics_batch(run.id, [(step, _wall(step), {"k": 1.0}) for step in range(3)])
    with snapshot(engine) as conn:
        statement = phase_query(run.id, last_seq(conn, run.id))
        compiled = statement.compile(engine, compile_kwargs={"literal_binds": True})
        plan = " ".join(str(row) for row in conn.execute(text(f"EXPLAIN QUERY PLAN {compiled}")))
        assert "ix_events_run_type_seq" in plan, plan
        assert phase_at(conn, run.id, last_seq(conn, run.id)) == {"phase": "training", "since": 1.0}
        assert phase_at(conn, run.id, 0) is None
    engine.dispose()
