"""``GET /api/runs/{id}/metrics`` says the ``last_seq`` its series cover; the run's stream
followed from there brings exactly the later events: no metric lost, none twice (how the
run page opens a run: the history, then the stream after it).

A real service (without a worker) on a SQLite file; the run is written into its database
through a store, as a run process writes it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from server.store.db import make_engine, make_sessionmaker
from server.store.run_store import RunStore
from tests.service_harness import Service


@pytest.fixture
def service_and_store(tmp_path: Path) -> Iterator[tuple[Service, RunStore]]:
    service = Service(tmp_path / "data", worker=False).start()
    engine = make_engine(f"sqlite:///{tmp_path / 'data' / 'nnx_ppo.db'}")
    try:
        yield service, RunStore(make_sessionmaker(engine), tmp_path / "data" / "runs")
    finally:
        engine.dispose()
        service.close()


def _metrics(store: RunStore, run_id: str, steps: range) -> None:
    store.record_metrics_batch(run_id, [(s, 1.7e9 + s, {"loss": s / 10}) for s in steps])


def test_the_stream_from_the_metrics_last_seq_brings_exactly_the_rest(
    service_and_store: tuple[Service, RunStore],
) -> None:
    service, store = service_and_store
    run = store.create({}, kind="ppo", name="follow", tags=[], notes="", total_steps=100)
    store.transition(run.id, "start")
    _metrics(store, run.id, range(10, 60, 10))
    store.record_log(run.id, "compiled")

    history = service.client.get(f"/api/runs/{run.id}/metrics").json()
    seen = history["series"]["loss"]["step"]
    assert seen == [10, 20, 30, 40, 50]
    assert history["series"]["loss"]["wall_time"] == [1.7e9 + s for s in seen]
    # queued, running, five metrics, a log line.
    assert history["last_seq"] == 8

    _metrics(store, run.id, range(60, 110, 10))
    store.record_log(run.id, "done")
    store.transition(run.id, "finish")
    events = service.events(run.id, after_seq=history["last_seq"])

    assert [e["seq"] for e in events] == list(range(9, 9 + len(events)))
    later = [e["step"] for e in events if e["type"] == "metrics"]
    assert later == [60, 70, 80, 90, 100]
    assert sorted(seen + later) == list(range(10, 110, 10))  # none lost, none twice
    assert events[-1]["type"] == "status" and events[-1]["status"] == "succeeded"


def test_the_metrics_say_the_phase_as_of_their_last_seq(
    service_and_store: tuple[Service, RunStore],
) -> None:
    # A page opened mid-run follows from last_seq: the phase event before it is not
    # replayed, so the history carries it.
    service, store = service_and_store
    run = store.create({}, kind="ppo", name="phase", tags=[], notes="", total_steps=100)
    store.transition(run.id, "start")
    assert service.client.get(f"/api/runs/{run.id}/metrics").json()["phase"] is None
    store.record_phase(run.id, "compiling", 1.7e9)
    store.record_phase(run.id, "training", 1.7e9 + 30)
    _metrics(store, run.id, range(10, 30, 10))

    history = service.client.get(f"/api/runs/{run.id}/metrics").json()
    assert history["phase"] == {"phase": "training", "since": 1.7e9 + 30}
    store.record_phase(run.id, "evaluating", 1.7e9 + 60)  # after last_seq: the stream's
    events = service.events(run.id, after_seq=history["last_seq"], timeout=5)
    assert [e["phase"] for e in events if e["type"] == "phase"] == ["evaluating"]
