"""Helpers of the reliability suite: a service with a few more handles (run pids, the
database file, metrics as stored), a database consistency check, and checkpoint checks."""

from __future__ import annotations

import csv
import io
import os
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.service_harness import Service

CHECKPOINT_PARTS = ("metadata.pkl", "networks", "optimizer")


class ReliableService(Service):
    """``Service`` plus what fault tests need to aim and to check."""

    @property
    def db_path(self) -> Path:
        return self.data_dir / "nnx_ppo.db"

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
        with sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=30) as db:
            rows = db.execute(
                "SELECT seq, type, payload FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        import json

        return [{"seq": seq, "type": kind, **json.loads(payload)} for seq, kind, payload in rows]

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


def database_problems(db_path: Path) -> list[str]:
    """What is inconsistent in the service's database: event seqs that are not 1..last_seq,
    a status that is not the last status event, a finished run with a pid, metric counts
    that disagree with the rows, duplicated metric steps."""
    problems = []
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        runs = db.execute("SELECT id, status, last_seq, pid, steps FROM runs").fetchall()
        for run_id, status, last_seq, pid, steps in runs:
            seqs = [
                s
                for (s,) in db.execute(
                    "SELECT seq FROM events WHERE run_id=? ORDER BY seq", (run_id,)
                )
            ]
            if seqs != list(range(1, last_seq + 1)):
                problems.append(f"{run_id}: event seqs {seqs[:5]}... are not 1..{last_seq}")
            last_status = db.execute(
                "SELECT json_extract(payload, '$.status') FROM events WHERE run_id=? "
                "AND type='status' ORDER BY seq DESC LIMIT 1",
                (run_id,),
            ).fetchone()
            if last_status is None or last_status[0] != status:
                problems.append(f"{run_id}: status {status} but last status event {last_status}")
            if status in ("succeeded", "failed", "cancelled", "queued") and pid is not None:
                problems.append(f"{run_id}: {status} with pid {pid}")
            newest = db.execute(
                "SELECT max(step) FROM metrics WHERE run_id=?", (run_id,)
            ).fetchone()[0]
            if (newest or 0) != steps:
                problems.append(f"{run_id}: steps {steps} but newest metric step {newest}")
        for run_id, key, count, rows in db.execute(
            "SELECT k.run_id, k.key, k.count, (SELECT count(*) FROM metrics m "
            "WHERE m.run_id=k.run_id AND m.key=k.key) FROM metric_keys k"
        ):
            if count != rows:
                problems.append(f"{run_id}: {key} counted {count} but {rows} rows")
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
