"""The database's locking: write transactions hold SQLite's write lock from their start,
reads never wait for a writer; a run is claimed by exactly one of several supervisors."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from server.store.db import make_engine, make_sessionmaker, migrate, transaction
from server.store.run_store import RunStore


@pytest.fixture
def db(tmp_path: Path) -> tuple[str, RunStore]:
    path = tmp_path / "db.sqlite"
    migrate(f"sqlite:///{path}")
    engine = make_engine(f"sqlite:///{path}")
    return str(path), RunStore(make_sessionmaker(engine), tmp_path / "runs")


def test_write_transactions_lock_at_begin_and_reads_do_not(db: tuple[str, RunStore]) -> None:
    path, store = db
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


def test_each_run_is_claimed_once_by_concurrent_supervisors(db: tuple[str, RunStore]) -> None:
    _, store = db
    ids = {
        store.create({}, kind="ppo", name=str(i), tags=[], notes="", total_steps=1).id
        for i in range(40)
    }
    claimed: list[list[str]] = [[] for _ in range(4)]

    def claim(i: int) -> None:
        worker = f"w{i}"
        while (run := store.claim_next(worker)) is not None:
            claimed[i].append(run.id)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [run_id for part in claimed for run_id in part]
    assert sorted(every) == sorted(ids)  # all claimed, none twice
    for run_id in ids:  # each has exactly queued, then running: one start
        statuses = [e["status"] for e in store.events_after(run_id, 0)]
        assert statuses == ["queued", "running"]


def test_service_events_are_pruned_and_seqs_never_reused(
    db: tuple[str, RunStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    from server.store import run_store

    _, store = db
    monkeypatch.setattr(run_store, "SERVICE_EVENTS_KEPT", 5)
    monkeypatch.setattr(run_store, "PRUNE_EVERY", 4)
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
