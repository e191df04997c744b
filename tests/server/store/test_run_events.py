"""``server.store.run_events.record_items``, the one path for a run's events, on a real
SQLite file: order, metrics batching around other items, idempotence by step, and a
malformed batch stored not at all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from server.schemas import RunPublic
from server.store.db import make_engine, make_sessionmaker, migrate, transaction
from server.store.run_events import ReportItem, lock_run, record_items
from server.store.run_store import RunStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    engine = make_engine(url, durable=False)
    yield RunStore(make_sessionmaker(engine), tmp_path / "runs")
    engine.dispose()


def _running(store: RunStore) -> str:
    run = store.create({}, kind="ppo", name="r", tags=[], notes="", total_steps=100)
    store.transition(run.id, "start")
    return run.id


def _record(store: RunStore, run_id: str, items: list[ReportItem]) -> None:
    with transaction(store.sessions) as session:
        record_items(session, lock_run(session, run_id), items)


def _reported(store: RunStore, run_id: str) -> list[tuple[int, str, object]]:
    """``(seq, type, what)`` of the run's events after its two status events."""
    what = {"metrics": "step", "log": "line", "phase": "phase", "checkpoint": "checkpoint"}
    return [
        (e["seq"], e["type"], e["video"]["step"] if e["type"] == "video" else e[what[e["type"]]])
        for e in store.events_after(run_id, 2)
    ]


def test_items_are_stored_in_order_with_metrics_around_a_log(store: RunStore) -> None:
    run_id = _running(store)
    checkpoint = {"step": 20, "size_bytes": 3, "created_at": 1.0, "url": "/x"}
    _record(
        store,
        run_id,
        [
            ReportItem.metrics(10, 1.0, {"k": 1.0}),
            ReportItem.metrics(20, 2.0, {"k": float("nan")}),
            ReportItem("log", {"line": "between"}),
            ReportItem.metrics(30, 3.0, {"k": 3.0}),
            ReportItem("phase", {"phase": "evaluating", "since": 4.0}),
            ReportItem.from_wire({"type": "checkpoint", **checkpoint}),
            ReportItem.video(30, "step_0000000030.mp4", float("inf"), 7),
        ],
    )
    # Seqs 1 and 2 are the queued and running statuses; the reports follow, gapless.
    assert _reported(store, run_id) == [
        (3, "metrics", 10),
        (4, "metrics", 20),
        (5, "log", "between"),
        (6, "metrics", 30),
        (7, "phase", "evaluating"),
        (8, "checkpoint", checkpoint),  # its wire "type" is not part of the event
        (9, "video", 30),
    ]
    events = store.events_after(run_id, 2)
    assert events[1]["values"] == {"k": "NaN"}
    assert events[-1]["video"]["episode_reward"] == "Infinity"
    run = store.get(run_id)
    assert run.steps == 30 and run.last_seq == 9 and run.latest_metrics == {"k": 3.0}


def test_a_repeated_step_is_stored_once(store: RunStore) -> None:
    run_id = _running(store)
    first = [ReportItem.metrics(s, float(s), {"k": float(s)}) for s in (10, 20)]
    _record(store, run_id, first)
    # A retry of both steps, then a log and a new step: only the log and step 30 are new.
    again = [ReportItem.metrics(s, 0.0, {"k": -1.0}) for s in (10, 20)]
    _record(store, run_id, [*again, ReportItem("log", {"line": "l"}), *first[1:]])
    _record(store, run_id, [ReportItem.metrics(30, 30.0, {"k": 30.0})])
    assert _reported(store, run_id) == [
        (3, "metrics", 10),
        (4, "metrics", 20),
        (5, "log", "l"),
        (6, "metrics", 30),
    ]
    assert [e.get("values") for e in store.events_after(run_id, 2)][:2] == [
        {"k": 10.0},
        {"k": 20.0},
    ]


def test_a_batch_with_a_bad_item_is_stored_not_at_all(store: RunStore) -> None:
    run_id = _running(store)
    good = ReportItem.metrics(10, 1.0, {"k": 1.0})
    for bad in (ReportItem("phase", {"phase": "napping", "since": 0.0}), ReportItem("x", {})):
        with pytest.raises(ValueError):
            store.record_items(run_id, [good, ReportItem("log", {"line": "a"}), bad])
    assert store.events_after(run_id, 2) == [] and store.get(run_id).steps == 0


@pytest.mark.parametrize("trial", [None, 3])
def test_a_created_event_shows_the_run_as_the_api_does(store: RunStore, trial: int | None) -> None:
    """The store writes the ``created`` event's run without the API's models: it is what
    ``RunPublic`` makes of the row."""
    run = store.create(
        {"env": {"name": "e"}},
        kind="ppo",
        name="c",
        tags=["t"],
        notes="n",
        total_steps=5,
        sweep_id=None if trial is None else "s",
        trial=trial,
        trial_params=None if trial is None else {"config.lr": 0.1},
    )
    created = store.service_events_after(0)[-1]
    assert created["type"] == "created"
    assert created["run"] == RunPublic.model_validate(run, from_attributes=True).model_dump(
        mode="json"
    )
