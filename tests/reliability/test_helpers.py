"""The suite's database check finds what it looks for, on SQLite and on PostgreSQL: a run
written through the run store is consistent, and each kind of damage done to it behind the
store's back (plain SQL) is named."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import update

from server.store.db import make_engine, make_sessionmaker
from server.store.models import MetricKeyRow, RunRow
from server.store.run_store import RunStore
from tests.reliability.helpers import database_problems
from tests.service_harness import tiny_ppo_spec


def test_database_problems_names_each_inconsistency(database_url: str, tmp_path: Path) -> None:
    engine = make_engine(database_url)
    store = RunStore(make_sessionmaker(engine), tmp_path / "runs")
    try:
        run = store.create(
            tiny_ppo_spec(), kind="ppo", name="checked", tags=[], notes="", total_steps=20_000
        )
        assert store.claim_next("worker-1") is not None
        store.set_pid(run.id, 4242)
        store.record_metrics(run.id, 160, 1.0, {"losses/actor": 1.0})
        store.record_metrics(run.id, 320, 2.0, {"losses/actor": 0.5})
        assert database_problems(database_url) == []
        last_seq = store.get(run.id).last_seq

        with engine.begin() as db:
            db.execute(
                update(RunRow)
                .where(RunRow.id == run.id)
                .values(last_seq=last_seq + 1, status="succeeded", steps=480)
            )
            db.execute(
                update(MetricKeyRow)
                .where(MetricKeyRow.run_id == run.id)
                .values(count=MetricKeyRow.count + 1)
            )
        problems = database_problems(database_url)
    finally:
        engine.dispose()
    expected = [
        re.escape(f"{run.id}: event seqs {[*range(1, last_seq + 1)][:5]}... are not 1..")
        + f"{last_seq + 1}$",
        rf"{run.id}: status succeeded but last status event .*'running'",
        rf"{run.id}: succeeded with pid 4242$",
        rf"{run.id}: steps 480 but newest metric step 320$",
        rf"{run.id}: losses/actor counted 3 but 2 rows$",
    ]
    assert len(problems) == len(expected), problems
    for pattern, problem in zip(expected, problems, strict=True):
        assert re.match(pattern, problem), (pattern, problem)
