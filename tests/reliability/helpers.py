"""Helpers of the reliability suite: a service with a few more handles (run pids, its
database, metrics as stored), a database consistency check, and checkpoint checks.

The database is read through SQLAlchemy at the service's URL, so the same checks hold on
SQLite (the data directory's file) and on PostgreSQL (``NNX_PPO_DATABASE_URL``).
"""

from __future__ import annotations

import csv
import io
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, func, select
from sqlalchemy.engine import make_url

from server.store.db import backend, make_engine
from server.store.models import EventRow, MetricKeyRow, MetricRow, RunRow
from tests.service_harness import Service

CHECKPOINT_PARTS = ("metadata.pkl", "networks", "optimizer")


class ReliableService(Service):
    """``Service`` plus what fault tests need to aim and to check."""

    @property
    def db_path(self) -> Path:
        """The SQLite file (where the service has no ``NNX_PPO_DATABASE_URL``)."""
        return self.data_dir / "nnx_ppo.db"

    @property
    def db_url(self) -> str:
        """The database the service uses, as it resolves it (``Settings.db_url``)."""
        return self.extra_env.get("NNX_PPO_DATABASE_URL") or f"sqlite:///{self.db_path}"

    def run_dir(self, run_id: str) -> Path:
        return self.data_dir / "runs" / run_id

    def checkpoints_dir(self, run_id: str) -> Path:
        return self.run_dir(run_id) / "checkpoints"

    def running_pid(self, run_id: str, timeout: float = 120) -> int:
        """The pid of the run's process, once the supervisor has started it."""
        run = self.wait_for(run_id, ["running"], timeout, predicate=lambda r: r.get("pid"))
        return int(run["pid"])

    def supervisor_pid(self) -> int:
        workers = self.client.get("/api/health").json()["workers"]
        assert len(workers) == 1, workers
        return int(workers[0]["pid"])

    def metric_rows(self, run_id: str) -> list[tuple[int, str, str]]:
        """``(step, key, value)`` of every stored metric, from ``metrics.csv``."""
        response = self.client.get(f"/api/runs/{run_id}/metrics.csv")
        assert response.status_code == 200, response.text
        return [
            (int(r["step"]), r["key"], r["value"])
            for r in csv.DictReader(io.StringIO(response.text))
        ]

    def stored_events(self, run_id: str) -> list[dict[str, Any]]:
        """Every event of the run as stored so far (the stream's replay, without waiting)."""
        with snapshot(self.db_url) as db:
            rows = db.execute(
                select(EventRow.seq, EventRow.type, EventRow.payload)
                .where(EventRow.run_id == run_id)
                .order_by(EventRow.seq)
            ).all()
        return [{"seq": seq, "type": kind, **payload} for seq, kind, payload in rows]

    def stored_metrics(self, run_id: str) -> list[tuple[int, str, float | None]]:
        """``(step, key, value)`` of every metric row of the run, read from the database (it
        works with the service stopped, unlike ``metric_rows``)."""
        with snapshot(self.db_url) as db:
            rows = db.execute(
                select(MetricRow.step, MetricRow.key, MetricRow.value).where(
                    MetricRow.run_id == run_id
                )
            ).all()
        return [(step, key, value) for step, key, value in rows]

    def statuses(self, run_id: str) -> list[str]:
        return [e["status"] for e in self.stored_events(run_id) if e["type"] == "status"]

    def signal_pid(self, pid: int, sig: signal.Signals = signal.SIGKILL) -> None:
        os.kill(pid, sig)


def wait_until(what: str, check: Callable[[], Any], timeout: float = 120, every=0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"not within {timeout} s: {what}")


def process_gone(pid: int, timeout: float = 15) -> bool:
    """Whether ``pid`` is gone (or a zombie) within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[1].startswith("Z"):
                    return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


@contextmanager
def snapshot(url: str) -> Iterator[Connection]:
    """A read-only connection to the database at ``url`` whose reads all see one snapshot
    (the service keeps writing while tests look): on SQLite a ``mode=ro`` connection in one
    ``BEGIN`` (WAL: it neither waits for writers nor blocks them), on PostgreSQL a read-only
    REPEATABLE READ transaction."""
    if backend(url) == "sqlite":
        engine = make_engine(f"sqlite:///file:{make_url(url).database}?mode=ro&uri=true")
        options: dict[str, Any] = {}
    else:
        engine = make_engine(url)
        options = {"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}
    try:
        with engine.connect().execution_options(**options) as db, db.begin():
            yield db
    finally:
        engine.dispose()


def database_problems(url: str) -> list[str]:
    """What is inconsistent in the service's database at ``url``, in one snapshot: event
        seqs that are not 1..last_seq, a status that is not the last status event, a finished
        or queued run with a pid, steps that are not the newest metric step (or, before any, the
    step it resumes from), metric counts that
        disagree with the rows (a metric step stored twice is ruled out by the metrics' primary
        key, on both backends). On SQLite the file must also pass ``PRAGMA integrity_check``
        (PostgreSQL has no equivalent; its checks are the logical ones)."""
    problems = []
    with snapshot(url) as db:
        if db.dialect.name == "sqlite":
            assert db.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
        runs = db.execute(
            select(RunRow.id, RunRow.status, RunRow.last_seq, RunRow.pid, RunRow.steps, RunRow.spec)
        ).all()
        for run_id, status, last_seq, pid, steps, spec in runs:
            seqs = list(
                db.scalars(
                    select(EventRow.seq).where(EventRow.run_id == run_id).order_by(EventRow.seq)
                )
            )
            if seqs != list(range(1, last_seq + 1)):
                problems.append(f"{run_id}: event seqs {seqs[:5]}... are not 1..{last_seq}")
            last_status = db.scalar(
                select(EventRow.payload)
                .where(EventRow.run_id == run_id, EventRow.type == "status")
                .order_by(EventRow.seq.desc())
                .limit(1)
            )
            if last_status is None or last_status.get("status") != status:
                problems.append(f"{run_id}: status {status} but last status event {last_status}")
            if status in ("succeeded", "failed", "cancelled", "queued") and pid is not None:
                problems.append(f"{run_id}: {status} with pid {pid}")
            newest = db.scalar(select(func.max(MetricRow.step)).where(MetricRow.run_id == run_id))
            # Before its first metric, a resumed run's steps are its checkpoint's step.
            start = ((spec or {}).get("resume_from") or {}).get("step", 0) or 0
            if (newest or start) != steps:
                problems.append(f"{run_id}: steps {steps} but newest metric step {newest}")
        rows = {
            (run_id, key): n
            for run_id, key, n in db.execute(
                select(MetricRow.run_id, MetricRow.key, func.count()).group_by(
                    MetricRow.run_id, MetricRow.key
                )
            )
        }
        for run_id, key, count in db.execute(
            select(MetricKeyRow.run_id, MetricKeyRow.key, MetricKeyRow.count)
        ):
            if count != rows.get((run_id, key), 0):
                problems.append(
                    f"{run_id}: {key} counted {count} but {rows.get((run_id, key), 0)} rows"
                )
    return problems


def checkpoint_steps(directory: Path) -> list[int]:
    return sorted(int(p.name[5:]) for p in directory.glob("step_*"))


def incomplete_checkpoints(directory: Path) -> list[str]:
    """The ``step_*`` directories that lack a part, or whose array stores did not commit."""
    bad = []
    for path in sorted(directory.glob("step_*")):
        missing = [p for p in CHECKPOINT_PARTS if not (path / p).exists()]
        for part in ("networks", "optimizer"):
            if (path / part).exists() and not (path / part / "commit_success.txt").exists():
                missing.append(f"{part}/commit_success.txt")
        if (path / "metadata.pkl").exists() and (path / "metadata.pkl").stat().st_size == 0:
            missing.append("metadata.pkl (empty)")
        if missing:
            bad.append(f"{path.name}: {missing}")
    return bad


def load_checkpoint_dir(path: Path, spec: dict[str, Any]) -> int:
    """Loads ``path`` with ``load_checkpoint`` into networks built from the run's spec;
    returns its step."""
    from nnx_ppo import envs
    from nnx_ppo.algorithms.checkpointing import load_checkpoint
    from nnx_ppo.algorithms.step import new_training_state
    from nnx_ppo.presets import make_networks

    env = envs.load(spec["env"]["name"])
    networks = make_networks(spec["network"], env.observation_size, env.action_size, 0)
    state = new_training_state(env, networks, 16, 0, 1e-4)
    return int(load_checkpoint(str(path), state.networks, state.optimizer)["step"])
