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
from server.store.metrics_query import last_seq, read_series, snapshot
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
