"""The service dies and comes back, on one data directory: ``kill -9`` of the supervisor
alone, then of the whole service (API, supervisor and run processes), then a ``SIGTERM``.
After each restart the running run was requeued (``interrupted``, then ``queued``) and
resumes from its newest complete checkpoint (the steps stored after it are rewound and
trained again); no metric step is stored twice, none is lost; the queued run
is still queued; no run is claimed twice. A warm stop checkpoints, requeues and exits 0.

The tests share one data directory and follow each other (one story in three acts). The
story is told once per database backend: SQLite (the data directory's file), then
PostgreSQL (a fresh database of the session's cluster, migrated by the service itself), where
requeueing and claiming are row locks instead of SQLite's write lock.

The story's run trains a built-in env; a last act (SQLite) kills the service under a MuJoCo
Playground run, whose env states hold an ``mjx.Data``, and checks that it trains on past its
next checkpoint."""

from __future__ import annotations

import os
import signal
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
    process_gone,
    wait_until,
)
from tests.service_harness import tiny_cartpole_spec, tiny_ppo_spec

pytestmark = pytest.mark.category("faults")

ITERATION = 160  # 16 envs x 10 steps


class Story:
    def __init__(self, data_dir: Path, env: dict[str, str]):
        self.data_dir = data_dir
        self.env = env
        self.svc: ReliableService | None = None
        self.running: dict[str, Any] = {}
        self.queued: dict[str, Any] = {}
        self.restarts = 0

    def start(self) -> ReliableService:
        if self.svc is not None:
            self.svc.close()
        self.svc = ReliableService(self.data_dir, env=self.env).start()
        return self.svc


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def story(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Story]:
    env = service_env(request, request.param)
    s = Story(tmp_path_factory.mktemp(f"restart-{request.param}") / "data", env)
    svc = s.start()
    spec = tiny_ppo_spec(50_000_000, checkpoint_every_steps=800)
    s.running = svc.submit({**spec, "name": "long"})
    s.queued = svc.submit({**spec, "name": "waiting"})  # one slot: it waits
    yield s
    if s.svc is not None:
        s.svc.close()


def _midway(svc: ReliableService, run_id: str, newer_than: int) -> tuple[int, set]:
    """Waits until the run has a checkpoint after step ``newer_than`` and trained past it;
    returns that checkpoint's step and the metrics stored so far."""
    checkpoints = svc.checkpoints_dir(run_id)

    def newest() -> int:
        steps = checkpoint_steps(checkpoints)
        return steps[-1] if steps and steps[-1] > newer_than else 0

    step = wait_until("a new checkpoint", newest)
    svc.wait_for(run_id, ["running"], 60, lambda r: r["steps"] > step)
    return step, {(s, k) for s, k, _ in svc.metric_rows(run_id)}


def _check_resumed(svc: ReliableService, story: Story, before: set, attempts: int) -> int:
    """The run was interrupted, requeued and claimed once more; it continues from its newest
    complete checkpoint, without storing a step twice or losing one stored before."""
    run_id = story.running["id"]
    checkpoints = svc.checkpoints_dir(run_id)
    assert incomplete_checkpoints(checkpoints) == []
    newest = checkpoint_steps(checkpoints)[-1]
    # Claimed again (``attempts``), then the new process says where it resumes from; its
    # progress is read from the events it stores (``steps`` goes back at a rewind).
    svc.wait_for(run_id, ["running"], 120, lambda r: r["attempts"] >= attempts)
    statuses = svc.statuses(run_id)
    assert statuses[-3:] == ["interrupted", "queued", "running"], statuses
    assert statuses.count("running") == attempts == svc.run(run_id)["attempts"]

    def restart_seq() -> int:
        return max(e["seq"] for e in svc.stored_events(run_id) if e["type"] == "status")

    def resumed(kind: str) -> list[dict[str, Any]]:
        """The events of ``kind`` that the resumed process stored."""
        since = restart_seq()
        return [e for e in svc.stored_events(run_id) if e["type"] == kind and e["seq"] > since]

    lines = wait_until(
        "the resumed run's log",
        lambda: [e["line"] for e in resumed("log") if "resuming from" in e["line"]],
    )
    assert any(f"step_{newest:010d}" in line or f"(step {newest})" in line for line in lines), lines
    # Steps stored after the newest checkpoint (the killed process trained past it) are
    # rewound and trained again: the resumed run stores every step after the checkpoint, and
    # when it is past them all, none of the steps stored before is missing.
    past = max(step for step, _ in before) + ITERATION
    wait_until(
        "the resumed run past the steps stored before",
        lambda: any(e["step"] > past for e in resumed("metrics")),
    )
    assert resumed("metrics")[0]["step"] == newest + ITERATION
    assert all(e["step"] == newest for e in resumed("rewind"))
    after = svc.metric_rows(run_id)
    assert before <= {(step, key) for step, key, _ in after}
    assert len({(step, key) for step, key, _ in after}) == len(after)
    steps = sorted({step for step, _, _ in after})
    assert steps == list(range(ITERATION, steps[-1] + 1, ITERATION))  # no gap, no repeat
    assert svc.statuses(story.queued["id"]) == ["queued"]
    assert svc.run(story.queued["id"])["attempts"] == 0
    assert database_problems(svc.db_url) == []
    return newest


def test_kill_9_of_the_supervisor_then_restart(story: Story) -> None:
    svc = story.svc
    assert svc is not None
    run_id = story.running["id"]
    run_pid = svc.running_pid(run_id)
    _, before = _midway(svc, run_id, 0)
    os.kill(svc.supervisor_pid(), signal.SIGKILL)
    assert process_gone(run_pid), "the run process outlived its supervisor"
    assert svc.terminate(60) == 0  # the API alone stops cleanly
    svc = story.start()
    _check_resumed(svc, story, before, attempts=2)


def test_kill_9_of_the_whole_service_then_restart(story: Story) -> None:
    svc = story.svc
    assert svc is not None
    run_id = story.running["id"]
    checkpoints = svc.checkpoints_dir(run_id)
    newest = checkpoint_steps(checkpoints)[-1]

    def just_written() -> bool:
        steps = checkpoint_steps(checkpoints)
        return bool(steps) and steps[-1] > newest

    # Right after a checkpoint lands: where a checkpoint written ahead of its metrics
    # would leave a hole in the history of the resumed run.
    wait_until("a new checkpoint", just_written, every=0.001)
    svc.kill()
    before = {(step, key) for step, key, _ in svc.stored_metrics(run_id)}
    svc = story.start()
    _check_resumed(svc, story, before, attempts=3)


def test_sigterm_checkpoints_requeues_and_exits_0(story: Story) -> None:
    svc = story.svc
    assert svc is not None
    run_id = story.running["id"]
    svc.wait_for(run_id, ["running"], 60, lambda r: r["steps"] > 0)
    assert svc.terminate(150) == 0
    story.svc = None
    svc.client.close()
    run = ReliableService(story.data_dir, env=story.env)  # reads the database and files only
    statuses = run.statuses(run_id)
    assert statuses[-2:] == ["interrupted", "queued"], statuses
    metrics = {step for step, _, _ in run.stored_metrics(run_id)}
    # A final checkpoint at the step it stopped at.
    assert checkpoint_steps(run.checkpoints_dir(run_id))[-1] == max(metrics)
    assert incomplete_checkpoints(run.checkpoints_dir(run_id)) == []
    assert run.statuses(story.queued["id"]) == ["queued"]
    assert database_problems(run.db_url) == []
    run.client.close()


def test_kill_9_before_the_first_checkpoint_then_restart(tmp_path: Path) -> None:
    """Killed with metrics stored and no checkpoint yet (where a sweep trial was when CI
    killed it): the run starts over, the stored metrics are rewound to step 0 and stored
    again, and a cancel soon after ends it at its final checkpoint's step, not at the steps
    of the killed process."""
    data_dir = tmp_path / "data"
    svc = ReliableService(data_dir).start()
    try:
        spec = tiny_ppo_spec(50_000_000, checkpoint_every_steps=10_000_000)
        run_id = svc.submit(spec)["id"]
        svc.wait_for(run_id, ["running"], 120, lambda r: r["steps"] >= 3 * ITERATION)
        assert checkpoint_steps(svc.checkpoints_dir(run_id)) == []
        stored = max(step for step, _, _ in svc.metric_rows(run_id))
        svc.close()  # SIGKILL of the whole service
        svc = ReliableService(data_dir).start()
        svc.wait_for(run_id, ["running"], 120, lambda r: r["attempts"] >= 2)

        def resumed(kind: str) -> list[dict[str, Any]]:
            events = svc.stored_events(run_id)
            since = max(e["seq"] for e in events if e["type"] == "status")
            return [e for e in events if e["type"] == kind and e["seq"] > since]

        wait_until("the restarted run's first metrics", lambda: resumed("metrics"))
        assert resumed("metrics")[0]["step"] == ITERATION
        [rewind] = resumed("rewind")
        assert rewind["step"] == 0 and rewind["from_step"] >= stored
        assert svc.client.post(f"/api/runs/{run_id}/cancel").status_code == 202
        run = svc.wait_for(run_id, timeout=120)
        assert run["status"] == "cancelled"
        assert checkpoint_steps(svc.checkpoints_dir(run_id))[-1] == run["steps"]
        rows = svc.metric_rows(run_id)
        assert len({(step, key) for step, key, _ in rows}) == len(rows)
        steps = sorted({step for step, _, _ in rows})
        assert steps == list(range(ITERATION, run["steps"] + 1, ITERATION))
        assert database_problems(svc.db_url) == []
    finally:
        svc.close()


@pytest.mark.slow
def test_kill_9_under_a_playground_run_then_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    svc = ReliableService(data_dir).start()
    try:
        run_id = svc.submit(tiny_cartpole_spec(50_000_000, checkpoint_every_steps=64))["id"]
        svc.wait_for(run_id, ["running"], 400, lambda r: r["steps"] > 0)  # compiled
        newest, _ = _midway(svc, run_id, 0)
        svc.close()  # SIGKILL of the whole service, and the test's own connections closed
        svc = ReliableService(data_dir).start()
        checkpoints = svc.checkpoints_dir(run_id)
        svc.wait_for(run_id, ["running"], 120, lambda r: r["attempts"] >= 2)  # claimed again
        # Requeued, resumed from its newest checkpoint, and checkpointing again after it: a
        # resumed Playground run failed here ("unsupported dtype int64").
        wait_until(
            "a checkpoint after the restart",
            lambda: (
                checkpoint_steps(checkpoints)[-1] > newest or svc.run(run_id)["status"] != "running"
            ),
            timeout=300,
        )
        run = svc.run(run_id)
        assert run["status"] == "running", (run["error"], svc.statuses(run_id))
        assert svc.statuses(run_id)[-3:] == ["interrupted", "queued", "running"]
        assert incomplete_checkpoints(checkpoints) == []
        assert svc.client.post(f"/api/runs/{run_id}/cancel").status_code == 202
        assert svc.wait_for(run_id, timeout=120)["status"] == "cancelled"
    finally:
        svc.close()
