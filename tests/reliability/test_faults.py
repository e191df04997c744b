"""Faults inside a run, against a real service with two worker slots: ``kill -9`` of a run's
process at chosen moments (while it starts and compiles, mid-training, while a checkpoint is
being written), a full disk and an unwritable checkpoints directory while it writes, and a
diverging run. Each must end ``failed`` with its cause, keep what was stored (metrics,
complete checkpoints), keep the database consistent, and leave the other run going.

The module's service stores in SQLite; the kill mid-training is also aimed at a service of
its own on PostgreSQL."""

from __future__ import annotations

import os
import pickle
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.postgres import service_env
from tests.reliability.helpers import (
    ReliableService,
    checkpoint_steps,
    database_problems,
    incomplete_checkpoints,
    load_checkpoint_dir,
    wait_until,
)
from tests.service_harness import tiny_ppo_spec

pytestmark = pytest.mark.category("faults")

SIGKILLED = "killed by signal 9 (SIGKILL)"
LONG = 50_000_000  # runs that only end by a fault or a cancel


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReliableService]:
    service = ReliableService(
        tmp_path_factory.mktemp("faults") / "data", args=["--workers", "2"]
    ).start()
    yield service
    service.close()


@pytest.fixture(scope="module")
def survivor(svc: ReliableService) -> dict[str, Any]:
    """A run in the other slot that must keep training through the faults of this module."""
    run = svc.submit({**tiny_ppo_spec(LONG), "name": "survivor"})
    svc.wait_for(run["id"], ["running"], predicate=lambda r: r["steps"] > 0)
    return run


def _kill_and_check(svc: ReliableService, run_id: str, pid: int) -> dict[str, Any]:
    os.kill(pid, signal.SIGKILL)
    failed = svc.wait_for(run_id, timeout=60)
    assert failed["status"] == "failed", failed
    assert failed["error"].startswith(SIGKILLED), failed["error"]
    assert failed["pid"] is None
    assert database_problems(svc.db_url) == []
    return failed


def test_kill_while_it_starts_and_compiles(svc: ReliableService, survivor: dict) -> None:
    run = svc.submit({**tiny_ppo_spec(LONG), "name": "killed-at-start"})
    pid = svc.running_pid(run["id"])
    time.sleep(0.5)  # the child is importing JAX / compiling; nothing trained yet
    failed = _kill_and_check(svc, run["id"], pid)
    assert failed["steps"] == 0 and svc.metric_rows(run["id"]) == []
    assert svc.statuses(run["id"]) == ["queued", "running", "failed"]


@pytest.fixture(params=["sqlite", "postgresql"])
def svc_on_each(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ReliableService]:
    """The module's service (SQLite, the survivor training in the other slot), or for
    PostgreSQL a service of its own, with one slot, for this test only."""
    if request.param == "sqlite":
        request.getfixturevalue("survivor")
        yield request.getfixturevalue("svc")
        return
    service = ReliableService(
        tmp_path_factory.mktemp("faults-postgresql") / "data",
        env=service_env(request, "postgresql"),
    ).start()
    yield service
    service.close()


def test_kill_mid_training_keeps_metrics_and_checkpoints(svc_on_each: ReliableService) -> None:
    svc = svc_on_each
    spec = tiny_ppo_spec(LONG, checkpoint_every_steps=1600)
    run = svc.submit({**spec, "name": "killed-mid-training"})
    pid = svc.running_pid(run["id"])
    checkpoints = svc.checkpoints_dir(run["id"])
    wait_until("two checkpoints", lambda: len(checkpoint_steps(checkpoints)) >= 2)
    # Aim between checkpoints: no checkpoint being written right now.
    wait_until("no checkpoint in progress", lambda: not list(checkpoints.glob(".*.tmp")))
    before = svc.metric_rows(run["id"])
    assert before
    failed = _kill_and_check(svc, run["id"], pid)
    after = svc.metric_rows(run["id"])
    assert set(before) <= set(after)  # nothing stored was lost
    assert len({(step, key) for step, key, _ in after}) == len(after)
    assert failed["steps"] == max(step for step, _, _ in after)
    steps = checkpoint_steps(checkpoints)
    assert len(steps) >= 2 and incomplete_checkpoints(checkpoints) == []
    assert load_checkpoint_dir(checkpoints / f"step_{steps[-1]:010d}", run["spec"]) == steps[-1]
    listed = svc.client.get(f"/api/runs/{run['id']}/checkpoints").json()["items"]
    assert [c["step"] for c in listed] == steps


def test_kill_while_a_checkpoint_is_written(svc: ReliableService, survivor: dict) -> None:
    """A checkpoint after every iteration, and the kill lands while one is half-written
    (its hidden temporary directory exists): no ``step_`` directory is incomplete, and the
    half-written one is neither listed nor served."""
    for _attempt in range(3):
        spec = tiny_ppo_spec(LONG, checkpoint_every_steps=160)
        run = svc.submit({**spec, "name": "killed-in-checkpoint"})
        pid = svc.running_pid(run["id"])
        checkpoints = svc.checkpoints_dir(run["id"])
        wait_until("a first checkpoint", lambda c=checkpoints: checkpoint_steps(c))
        wait_until("a checkpoint being written", lambda c=checkpoints: _writing(c), every=0.001)
        os.kill(pid, signal.SIGKILL)
        _kill_and_check(svc, run["id"], pid)
        if _writing(checkpoints):  # the kill did land mid-write
            break
    else:
        pytest.fail("three kills all missed the checkpoint write")
    assert incomplete_checkpoints(checkpoints) == []
    steps = checkpoint_steps(checkpoints)
    listed = svc.client.get(f"/api/runs/{run['id']}/checkpoints").json()["items"]
    assert [c["step"] for c in listed] == steps
    newest = svc.client.get(listed[-1]["url"])
    assert newest.status_code == 200 and newest.headers["content-type"] == "application/gzip"
    assert load_checkpoint_dir(checkpoints / f"step_{steps[-1]:010d}", run["spec"]) == steps[-1]


def _writing(checkpoints: Path) -> bool:
    """Whether a checkpoint is being written (its hidden temporary directory exists)."""
    with os.scandir(checkpoints) as entries:
        return any(e.name.endswith(".tmp") for e in entries)


def test_the_other_run_kept_training(svc: ReliableService, survivor: dict) -> None:
    before = svc.run(survivor["id"])
    assert before["status"] == "running" and before["error"] is None
    svc.wait_for(survivor["id"], ["running"], 60, lambda r: r["steps"] > before["steps"])
    assert svc.statuses(survivor["id"]) == ["queued", "running"]
    assert svc.client.post(f"/api/runs/{survivor['id']}/cancel").status_code == 202
    assert svc.wait_for(survivor["id"], timeout=60)["status"] == "cancelled"
    assert len(checkpoint_steps(svc.checkpoints_dir(survivor["id"]))) >= 2


class _Evil:
    """Unpickling this runs ``touch <canary>``: what a malicious ``metadata.pkl`` does."""

    def __init__(self, canary: Path):
        self.canary = canary

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.canary}",))


@pytest.fixture(scope="module")
def batch(
    svc: ReliableService, survivor: dict, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict]:
    """The runs of the tests below, submitted at once so that both slots stay busy: a disk
    to fill, a directory to break, a diverging run, and two runs that load tampered copies
    of the (finished) survivor's checkpoints: as a teacher, and to resume from."""
    assert svc.wait_for(survivor["id"], timeout=60)["status"] == "cancelled"
    out: dict[str, Any] = {}
    spec = tiny_ppo_spec(LONG, checkpoint_every_steps=800)
    out["disk_full"] = svc.submit({**spec, "name": "disk-full"})
    checkpoints = svc.checkpoints_dir(out["disk_full"]["id"])
    out["mounted"] = _can_mount_tmpfs(checkpoints)
    out["unwritable"] = svc.submit({**spec, "name": "unwritable"})
    out["diverging"] = svc.submit(tiny_ppo_spec(1600, ppo={"learning_rate": 1e30}))

    teacher_steps = checkpoint_steps(svc.checkpoints_dir(survivor["id"]))
    first, second = (
        svc.checkpoints_dir(survivor["id"]) / f"step_{s:010d}" for s in teacher_steps[:2]
    )
    out["canary"] = tmp_path_factory.mktemp("canary") / "pwned"
    (first / "metadata.pkl").write_bytes(pickle.dumps({"step": _Evil(out["canary"])}))
    out["tampered_teacher"] = svc.submit(
        {
            "kind": "distillation",
            "env": {"name": "PointReach"},
            "network": {"kind": "mlp", "actor_hidden_sizes": [8], "critic_hidden_sizes": [8]},
            "teacher": {"run_id": survivor["id"], "step": teacher_steps[0]},
            "config": {
                "distillation": {"n_envs": 16, "rollout_length": 10, "total_steps": 1600},
                "checkpoint_every_steps": 800,
            },
        }
    )
    resume = {
        **tiny_ppo_spec(LONG),
        "resume_from": {"run_id": survivor["id"], "step": teacher_steps[1]},
    }
    out["tampered_resume"] = svc.submit(resume)  # accepted: its checkpoint is still whole
    for array_file in (second / "networks").rglob("d/*"):  # damaged before the run starts
        array_file.write_bytes(array_file.read_bytes()[: array_file.stat().st_size // 2])
    out["resubmitted"] = svc.client.post("/api/runs", json=resume)
    yield out
    if out["mounted"]:
        subprocess.run(["umount", "-l", str(checkpoints)], capture_output=True)


def _can_mount_tmpfs(where: Path) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True
    )
    return done.returncode == 0


def test_disk_full_while_it_writes(svc: ReliableService, batch: dict) -> None:
    """The run's checkpoints directory is a 4 MB tmpfs, filled up after the first checkpoint:
    the next checkpoint hits ENOSPC (needs root or CAP_SYS_ADMIN to mount; the unwritable
    test below covers the other machines)."""
    run = batch["disk_full"]
    checkpoints = svc.checkpoints_dir(run["id"])
    if not batch["mounted"]:
        svc.client.post(f"/api/runs/{run['id']}/cancel")
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        wait_until("a first checkpoint", lambda: checkpoint_steps(checkpoints))
        before = svc.metric_rows(run["id"])
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={checkpoints / 'filler'}", "bs=64k"], capture_output=True
        )
        failed = svc.wait_for(run["id"], timeout=60)
        assert failed["status"] == "failed"
        assert "No space left on device" in failed["error"], failed["error"]
        assert set(before) <= set(svc.metric_rows(run["id"]))
        assert incomplete_checkpoints(checkpoints) == []
        assert database_problems(svc.db_url) == []
        assert svc.client.get(f"/api/runs/{run['id']}/checkpoints").status_code == 200
    finally:
        subprocess.run(["umount", "-l", str(checkpoints)], capture_output=True)


def test_unwritable_checkpoints_dir_while_it_writes(svc: ReliableService, batch: dict) -> None:
    """After the first checkpoint the checkpoints directory is swapped for a regular file
    (chmod does not stop root, which CI may be), so the next checkpoint cannot be made."""
    run = batch["unwritable"]
    checkpoints = svc.checkpoints_dir(run["id"])
    wait_until("a first checkpoint", lambda: checkpoint_steps(checkpoints))
    before = svc.metric_rows(run["id"])
    # Between checkpoints (one being written would fail on its own files going away).
    wait_until("no checkpoint in progress", lambda: not _writing(checkpoints), every=0.001)
    checkpoints.rename(checkpoints.with_name("checkpoints.moved"))
    checkpoints.write_text("not a directory\n")
    failed = svc.wait_for(run["id"], timeout=60)
    assert failed["status"] == "failed"
    # The OS's message naming the checkpoints path: a checkpoint begun in the moment between
    # the check above and the swap fails on its own files going away instead (ENOENT).
    cause = r"(File exists|Not a directory|No such file or directory).*checkpoints"
    assert re.search(cause, failed["error"]), failed["error"]
    assert set(before) <= set(svc.metric_rows(run["id"]))
    assert database_problems(svc.db_url) == []
    listed = svc.client.get(f"/api/runs/{run['id']}/checkpoints")
    assert listed.status_code == 200 and listed.json()["items"] == []


def test_a_diverging_run_names_the_metric_and_the_step(svc: ReliableService, batch: dict) -> None:
    """A learning rate of 1e30 makes the losses non-finite from the first iteration (step
    160 = 16 envs x 10 steps); the final checkpoint of the same jitted call sees the
    non-finite parameters first, but the message must still name the metric and step."""
    run = batch["diverging"]
    failed = svc.wait_for(run["id"], timeout=120)
    assert failed["status"] == "failed"
    assert re.match(r"diverged: losses/\S+ is (nan|inf|-inf) at step 160\b", failed["error"]), (
        failed["error"]
    )
    assert checkpoint_steps(svc.checkpoints_dir(run["id"])) == []  # nothing non-finite saved
    assert database_problems(svc.db_url) == []


def _worker_alive(svc: ReliableService) -> bool:
    workers = svc.client.get("/api/health").json()["workers"]
    return len(workers) == 1 and workers[0]["seconds_since_heartbeat"] < 5


@pytest.mark.category("bad_input")
def test_a_malicious_teacher_checkpoint_is_refused(svc: ReliableService, batch: dict) -> None:
    """The teacher checkpoint's ``metadata.pkl`` is a pickle that would run a command when
    loaded: the distillation fails naming the file, the command never runs, the worker
    lives on."""
    failed = svc.wait_for(batch["tampered_teacher"]["id"], timeout=120)
    assert failed["status"] == "failed"
    assert "metadata.pkl" in failed["error"] and not failed["error"].startswith("killed"), failed[
        "error"
    ]
    assert not batch["canary"].exists()
    assert _worker_alive(svc)


@pytest.mark.category("bad_input")
def test_truncated_checkpoint_arrays_are_refused_for_resume(
    svc: ReliableService, batch: dict
) -> None:
    """Half of every array file of the checkpoint to resume from is cut off after the run
    was accepted: the run fails with the loader's message (it is not a crash of its
    process), and the worker lives on. Submitted again, the spec is refused on
    ``resume_from`` before anything is queued."""
    failed = svc.wait_for(batch["tampered_resume"]["id"], timeout=120)
    assert failed["status"] == "failed"
    assert not failed["error"].startswith(("killed by", "the run process exited")), failed["error"]
    # Its progress is where it was to resume from (fb7c480); it trained nothing.
    assert failed["steps"] == failed["spec"]["resume_from"]["step"] > 0
    assert svc.metric_rows(failed["id"]) == []
    assert _worker_alive(svc)
    assert database_problems(svc.db_url) == []
    refused = batch["resubmitted"]
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert [d["loc"] for d in detail] == [["body", "resume_from"]]
    assert "no readable arrays" in detail[0]["msg"]
