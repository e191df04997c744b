"""The database's locking, on SQLite and PostgreSQL: write transactions exclude each other
where they must (SQLite's write lock from the start; PostgreSQL's row locks), reads never
wait for a writer, a run is claimed by exactly one of several supervisors, and ``seq`` stays
gapless under concurrent writers."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine, text

from server.settings import Settings
from server.store.db import (
    UnsupportedDatabase,
    backend,
    make_engine,
    make_sessionmaker,
    migrate,
    transaction,
)
from server.store.run_store import RunFilter, RunStore
from tests.postgres import PostgresServer


@pytest.fixture
def stores(tmp_path) -> Iterator[Callable[[str], RunStore]]:  # type: ignore[no-untyped-def]
    """Makes stores on a URL, each with its own engine; their connections are closed after."""
    engines: list[Engine] = []

    def make(url: str) -> RunStore:
        engines.append(make_engine(url))
        return RunStore(make_sessionmaker(engines[-1]), tmp_path / "runs")

    yield make
    for engine in engines:
        engine.dispose()


def _threads(n: int, target: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_sqlite_write_transactions_lock_at_begin_and_reads_do_not(tmp_path, stores) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "db.sqlite"
    migrate(f"sqlite:///{path}")
    store = stores(f"sqlite:///{path}")
    other = sqlite3.connect(path, timeout=0.1, isolation_level=None)
    with transaction(store.sessions) as session:
        session.execute(text("SELECT 1"))  # nothing written yet, but the lock is held
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
    other.execute("BEGIN IMMEDIATE")  # free again after the commit
    other.execute("ROLLBACK")
    with store.sessions() as session:  # a read transaction: another writer is not blocked
        session.execute(text("SELECT COUNT(*) FROM runs")).scalar()
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")


def test_postgres_claims_skip_a_run_being_claimed_and_writers_wait_for_the_row(
    postgres: PostgresServer, stores
) -> None:  # type: ignore[no-untyped-def]
    store = stores(postgres.database())
    first = store.create({}, kind="ppo", name="a", tags=[], notes="", total_steps=1)
    second = store.create({}, kind="ppo", name="b", tags=[], notes="", total_steps=1)
    done = threading.Event()
    logged_at: list[float] = []

    def log() -> None:  # a writer of the locked run waits for the lock holder's commit
        store.record_log(first.id, "waited")
        logged_at.append(time.monotonic())
        done.set()

    with transaction(store.sessions) as session:  # holds ``first``'s row, as a claim does
        session.execute(text("SELECT id FROM runs WHERE id = :r FOR UPDATE"), {"r": first.id})
        claimed = store.claim_next("other")  # not blocked: it skips the locked run
        assert claimed is not None and claimed.id == second.id
        with store.sessions() as reader:  # reads are not blocked either
            assert reader.execute(text("SELECT COUNT(*) FROM runs")).scalar() == 2
        writer = threading.Thread(target=log)
        writer.start()
        assert not done.wait(0.5)
        released = time.monotonic()
    writer.join(10)
    assert logged_at and logged_at[0] >= released
    assert [e["type"] for e in store.events_after(first.id, 0)] == ["status", "log"]


def test_each_run_is_claimed_once_by_concurrent_supervisors(database_url: str, stores) -> None:  # type: ignore[no-untyped-def]
    # Four supervisors, each with its own engine (connection pool), as separate processes
    # would have: 200 queued runs, every one claimed, none twice.
    supervisors = [stores(database_url) for _ in range(4)]
    ids = {
        supervisors[0].create({}, kind="ppo", name=str(i), tags=[], notes="", total_steps=1).id
        for i in range(200)
    }
    claimed: list[list[str]] = [[] for _ in range(4)]
    # Each claims one run, then all go on together: they claim concurrently by construction
    # (on a loaded machine one thread could otherwise take all 200 before the others start).
    together = threading.Barrier(4, timeout=60)

    def claim(i: int) -> None:
        while (run := supervisors[i].claim_next(f"w{i}")) is not None:
            claimed[i].append(run.id)
            if len(claimed[i]) == 1:
                together.wait()

    _threads(4, claim)
    every = [run_id for part in claimed for run_id in part]
    assert sorted(every) == sorted(ids)  # all claimed, none twice
    assert all(claimed)
    runs, total = supervisors[0].list_runs(RunFilter(status="running", limit=200))
    assert total == 200 and {r.worker_id for r in runs} == {
        f"w{i}" for i, p in enumerate(claimed) if p
    }
    for run_id in ids:  # each has exactly queued, then running: one start
        statuses = [e["status"] for e in supervisors[0].events_after(run_id, 0)]
        assert statuses == ["queued", "running"]


def test_service_events_are_pruned_and_seqs_never_reused(
    database_url: str, stores, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from server.store import service_events

    store = stores(database_url)
    monkeypatch.setattr(service_events, "SERVICE_EVENTS_KEPT", 5)
    monkeypatch.setattr(service_events, "PRUNE_EVERY", 4)
    for i in range(10):  # one "created" event each: seqs 1..10, pruned at 4 and 8
        store.create({}, kind="ppo", name=str(i), tags=[], notes="", total_steps=1)
    assert [e["seq"] for e in store.service_events_after(0)] == list(range(4, 11))
    run = store.create({}, kind="ppo", name="x", tags=[], notes="", total_steps=1)
    store.transition(run.id, "cancel")
    store.delete(run.id)  # its events outlive it
    events = store.service_events_after(10)
    assert [(e["seq"], e["type"]) for e in events] == [
        (11, "created"),
        (12, "status"),
        (13, "deleted"),
    ]
    assert store.service_events_seq() == 13


def test_seq_stays_gapless_under_concurrent_writers(database_url: str, stores) -> None:  # type: ignore[no-untyped-def]
    store = stores(database_url)
    run = store.create({}, kind="ppo", name="g", tags=[], notes="", total_steps=10**10)
    store.transition(run.id, "start")

    def write(i: int) -> None:  # logs, metrics and a cancel request, all at once
        for j in range(25):
            if i == 0:
                store.record_metrics(run.id, 3_000_000_000 + j, 0.0, {"k": float(j)})
            else:
                store.record_log(run.id, f"{i}-{j}")
            if i == 1 and j == 10:
                store.request_cancel(run.id)

    def create(i: int) -> None:  # other runs created meanwhile: service events too
        for j in range(10):
            store.create({}, kind="ppo", name=f"{i}-{j}", tags=[], notes="", total_steps=1)

    _threads(6, lambda i: write(i) if i < 4 else create(i))
    service = store.service_events_after(0, limit=1000)
    assert [e["seq"] for e in service] == list(range(1, len(service) + 1))
    assert sum(e["type"] == "created" for e in service) == 1 + 20
    events = store.events_after(run.id, 0, limit=1000)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert len(events) == 2 + 25 * 4
    assert store.get(run.id).last_seq == len(events)
    assert store.get(run.id).steps == 3_000_000_024  # steps past 2**31 are kept whole
    assert store.get(run.id).cancel_requested


def test_tag_and_name_filters_on_both_backends(database_url: str, stores) -> None:  # type: ignore[no-untyped-def]
    store = stores(database_url)
    a = store.create({}, kind="ppo", name="Cartpole-Base", tags=["x", "y"], notes="", total_steps=1)
    store.create({}, kind="ppo", name="other", tags=["y"], notes="", total_steps=1)
    assert [r.id for r in store.list_runs(RunFilter(tag="x"))[0]] == [a.id]
    assert store.list_runs(RunFilter(tag="y"))[1] == 2
    assert [r.id for r in store.list_runs(RunFilter(q="cartpole"))[0]] == [a.id]
    assert store.list_runs(RunFilter(q="%"))[1] == 0  # LIKE wildcards are literal


def test_database_urls_are_checked_at_start_up() -> None:
    assert backend("sqlite:///x.db") == "sqlite"
    assert backend("postgresql+psycopg://u:p@h:5432/d") == "postgresql"
    assert backend("postgresql://u@h/d") == "postgresql"  # psycopg is SQLAlchemy's default
    for bad, why in [
        ("mysql://u@h/d", "unsupported database 'mysql'"),
        ("postgresql+psycopg2://u@h/d", "psycopg 3"),
        ("not a url", "not a database URL"),
    ]:
        with pytest.raises(UnsupportedDatabase, match=why):
            backend(bad)
        with pytest.raises(ValueError, match="database_url"):
            Settings(database_url=bad)


def test_device_claims_read_the_spec_on_both_backends(database_url: str, stores) -> None:  # type: ignore[no-untyped-def]
    store = stores(database_url)

    def make(resources: dict | None) -> str:
        spec = {} if resources is None else {"resources": resources}
        return store.create(spec, kind="ppo", name="d", tags=[], notes="", total_steps=1).id

    big, two, default = make({"gpus": 4}), make({"gpus": 2, "cpus": 1}), make(None)
    # ``big`` asks for more than this worker has: left for another; ``two`` waits in its
    # place while one device is free, and nothing behind it passes it.
    assert store.claim_next("w", free=1, total=2) is None
    claimed = store.claim_next("w", free=2, total=2)
    assert claimed is not None and claimed.id == two
    claimed = store.claim_next("w", free=1, total=2)
    assert claimed is not None and claimed.id == default  # no resources: one device
    assert store.get(big).status == "queued"
