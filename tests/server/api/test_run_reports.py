"""A remote run process's HTTP path (``/api/runs/{id}/report/...`` and ``HttpReporter``)
against a real API process and its real SQLite file, without Ray: what a run token opens
and what it does not, batches and uploads stored once, and reports that outlive an API
restart."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from server.store import artifacts, run_reports
from server.store.db import make_engine, make_sessionmaker
from server.store.run_store import RunStore
from server.worker.http_reporter import HttpReporter
from server.worker.reporter import Reporter, ReportFailed, RunReporter
from tests.service_harness import Service, tiny_ppo_spec

UPLOAD_LIMIT = 300_000


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    env = {"NNX_PPO_MAX_UPLOAD_BYTES": str(UPLOAD_LIMIT)}
    svc = Service(tmp_path_factory.mktemp("reports") / "data", worker=False, env=env).start()
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def store(service: Service) -> Iterator[RunStore]:
    engine = make_engine(f"sqlite:///{service.data_dir / 'nnx_ppo.db'}")
    yield RunStore(make_sessionmaker(engine), service.data_dir / "runs")
    engine.dispose()


def running_run(store: RunStore, **spec_fields: object) -> tuple[str, str]:
    """A run claimed by a worker of this test, and its run token."""
    spec = {**tiny_ppo_spec(), **spec_fields}
    run = store.create(spec, kind="ppo", name="r", tags=[], notes="", total_steps=20_000)
    worker = store.register_worker(["ray:0"], "ray")
    while (claimed := store.claim_next(worker)) is not None and claimed.id != run.id:
        store.transition(claimed.id, "fail", "not this test's")
    return run.id, run_reports.issue_token(store, run.id)


def as_run(service: Service, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=service.url, timeout=30, headers={"Authorization": f"Bearer {token}"}
    )


def checkpoint_archive(step: int, payload: bytes = b"x" * 100, name: str | None = None) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        folder = tarfile.TarInfo(f"step_{step:010d}")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)
        info = tarfile.TarInfo(name or f"step_{step:010d}/state.bin")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    return out.getvalue()


def test_a_run_token_opens_its_own_report_routes_alone(service: Service, store: RunStore) -> None:
    a, token_a = running_run(store)
    b, _token_b = running_run(store)
    c, _ = running_run(store, teacher={"run_id": b})
    with as_run(service, token_a) as run_a:
        assert run_a.post(f"/api/runs/{a}/report/heartbeat", json={}).status_code == 200
        assert run_a.get(f"/api/runs/{a}/report/inputs/{a}/spec").json()["env"] == {
            "name": "PointReach"
        }
        # Another run's reports, another run's spec, the admin API: refused.
        assert run_a.post(f"/api/runs/{b}/report/heartbeat", json={}).status_code == 401
        assert run_a.get(f"/api/runs/{a}/report/inputs/{b}/spec").status_code == 403
        for path in ("/api/runs", f"/api/runs/{a}", f"/api/runs/{a}/metrics", "/api/envs"):
            assert run_a.get(path).status_code == 401, path
        assert run_a.post(f"/api/runs/{b}/cancel").status_code == 401
    # The admin token does not open report routes, nor does no token.
    assert service.client.post(f"/api/runs/{a}/report/heartbeat", json={}).status_code == 401
    assert httpx.post(f"{service.url}/api/runs/{a}/report/heartbeat", json={}).status_code == 401
    # A run reads the spec of the run its spec names as teacher.
    token_c = run_reports.issue_token(store, c)
    with as_run(service, token_c) as run_c:
        assert run_c.get(f"/api/runs/{c}/report/inputs/{b}/spec").status_code == 200
    # Requeued (and so claimed again later with a new token), the old token is dead.
    store.transition(a, "interrupt", "test")
    store.transition(a, "requeue", None, worker_id=None)
    with as_run(service, token_a) as run_a:
        assert run_a.post(f"/api/runs/{a}/report/heartbeat", json={}).status_code == 401


def test_a_retried_batch_is_stored_once(service: Service, store: RunStore) -> None:
    run, token = running_run(store)
    batch = {
        "seq": 1,
        "items": [
            {"type": "metrics", "step": 160, "wall_time": 1.0, "values": {"a": 1.0}},
            {"type": "metrics", "step": 320, "wall_time": 2.0, "values": {"a": "NaN"}},
            {"type": "log", "line": "hello"},
        ],
    }
    with as_run(service, token) as client:
        url = f"/api/runs/{run}/report/batch"
        assert client.post(url, json=batch).json() == {"stored": True}
        assert client.post(url, json=batch).json() == {"stored": False}  # the retry
        again = {  # a later batch that repeats a step (a resumed run does): skipped by step
            "seq": 2,
            "items": [
                {"type": "metrics", "step": 320, "wall_time": 2.0, "values": {"a": 5.0}},
                {"type": "metrics", "step": 480, "wall_time": 3.0, "values": {"a": 3.0}},
            ],
        }
        assert client.post(url, json=again).json() == {"stored": True}
        bad = {"seq": 3, "items": [{"type": "shell", "command": "rm"}]}
        assert client.post(url, json=bad).status_code == 422
    events = store.events_after(run, 0)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["step"] for e in events if e["type"] == "metrics"] == [160, 320, 480]
    assert [e["values"]["a"] for e in events if e["type"] == "metrics"] == [1.0, "NaN", 3.0]
    assert [e["line"] for e in events if e["type"] == "log"] == ["hello"]


def test_uploads_are_checksummed_capped_and_atomic(service: Service, store: RunStore) -> None:
    run, token = running_run(store)
    url = f"/api/runs/{run}/report/checkpoints/4000"
    body = checkpoint_archive(4000)
    good = {"X-Content-SHA256": hashlib.sha256(body).hexdigest()}
    with as_run(service, token) as client:
        wrong = {"X-Content-SHA256": "0" * 64}
        assert client.put(url, content=body, headers=wrong).status_code == 422
        for huge in (
            checkpoint_archive(4000, payload=os.urandom(UPLOAD_LIMIT)),  # a body past the cap
            checkpoint_archive(4000, payload=b"\0" * 2 * UPLOAD_LIMIT),  # unpacks past it
        ):
            sha = {"X-Content-SHA256": hashlib.sha256(huge).hexdigest()}
            assert client.put(url, content=huge, headers=sha).status_code == 413
        escaping = checkpoint_archive(4000, name="../../outside.bin")
        sha = {"X-Content-SHA256": hashlib.sha256(escaping).hexdigest()}
        assert client.put(url, content=escaping, headers=sha).status_code == 422
        checkpoints = service.data_dir / "runs" / run / "checkpoints"
        assert artifacts.list_checkpoints(service.data_dir / "runs" / run) == []
        assert not (service.data_dir / "runs" / "outside.bin").exists()
        for _ in range(2):  # a retried upload replaces it with the same bytes
            assert client.put(url, content=body, headers=good).status_code == 201
        assert sorted(p.name for p in checkpoints.iterdir()) == ["step_0000004000"]
    listed = service.client.get(f"/api/runs/{run}/checkpoints").json()
    assert [c["step"] for c in listed["items"]] == [4000]
    download = service.client.get(f"/api/runs/{run}/checkpoints/4000")
    with tarfile.open(fileobj=io.BytesIO(download.content)) as tar:
        member = tar.extractfile("step_0000004000/state.bin")
        assert member is not None and member.read() == b"x" * 100


def test_http_reporter_outlives_an_api_restart(
    service: Service, store: RunStore, tmp_path: Path
) -> None:
    run, token = running_run(store)
    reporter = HttpReporter(service.url, run, token, node="node-x", heartbeat_s=0.2)
    try:
        reporter.metrics(160, {"losses/actor": 0.5})
        reporter.log("before the restart")
        reporter.flush()
        service.kill()
        reporter.metrics(320, {"losses/actor": 0.25})  # queued while the API is down
        run_dir = tmp_path / run
        checkpoint = run_dir / "checkpoints" / "step_0000000320"
        checkpoint.mkdir(parents=True)
        (checkpoint / "state.bin").write_bytes(b"weights")
        found = artifacts.find_checkpoint(run_dir, 320)
        assert found is not None
        reporter.checkpoint(found)
        time.sleep(1.0)  # the writer retries meanwhile
        restarted = Service(
            service.data_dir, worker=False, env=service.extra_env, port=service.port
        ).start()
        service.process = restarted.process  # the module's fixture stops it
        restarted.client.close()
        reporter.flush()
        events = store.events_after(run, 0)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert [e["step"] for e in events if e["type"] == "metrics"] == [160, 320]
        assert [e["checkpoint"]["step"] for e in events if e["type"] == "checkpoint"] == [320]
        assert store.get(run).node == "node-x"
        # Its checkpoint and input reads go through the API too.
        fresh = tmp_path / "elsewhere" / run
        got = reporter.checkpoint_input(run, None, fresh)
        assert got is not None and got.step == 320
        assert (got.path / "state.bin").read_bytes() == b"weights"
        # Cancel reaches it with the next heartbeat.
        assert not reporter.cancel_requested()
        assert service.client.post(f"/api/runs/{run}/cancel").status_code == 202
        deadline = time.monotonic() + 5
        while not reporter.cancel_requested() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reporter.cancel_requested()
        # Once the run is over, the token is refused and the reporter says so.
        store.transition(run, "cancel")
        reporter.log("after the end")
        with pytest.raises(ReportFailed, match="refused the run token"):
            reporter.flush()
        assert reporter.cancel_requested()  # and the run process stops
    finally:
        reporter.close()


@pytest.mark.parametrize("where", ["local", "remote"])
def test_both_reporters_store_the_same_reports(
    where: str, service: Service, store: RunStore, tmp_path: Path
) -> None:
    """One contract for ``RunReporter`` (the local executor's direct path) and
    ``HttpReporter`` (a node without the API's disk): the same reports, the same stored
    events, the same files downloadable from the API, the same answers."""
    run, token = running_run(store)
    reporter: Reporter
    if where == "local":
        run_dir = service.data_dir / "runs" / run  # the run process writes beside the API
        reporter = RunReporter(store, None, run)
    else:
        run_dir = tmp_path / "node" / run  # the node's own scratch directory
        reporter = HttpReporter(service.url, run, token, heartbeat_s=0.2)
    checkpoint = run_dir / "checkpoints" / "step_0000000160"
    checkpoint.mkdir(parents=True)
    (checkpoint / "state.bin").write_bytes(b"weights-160")
    video = run_dir / "videos" / "step_0000000160.mp4"
    video.parent.mkdir(parents=True)
    video.write_bytes(b"\0\0\0\x18ftypmp42-not-really")
    try:
        assert reporter.run_spec(run)["env"] == {"name": "PointReach"}
        reporter.metrics(160, {"losses/actor": 1.0})
        reporter.log("a line")
        reporter.phase("checkpointing", 1234.5)
        found = artifacts.find_checkpoint(run_dir, 160)
        assert found is not None
        reporter.checkpoint(found)
        reporter.video(160, video, 1.5, 10)
        reporter.metrics(320, {"losses/actor": float("nan")})
        reporter.flush()
        events = store.events_after(run, 0)
        kinds = [(e["type"], e.get("step") or e.get("line") or e.get("phase")) for e in events[2:]]
        expected = [
            ("metrics", 160),
            ("log", "a line"),
            ("phase", "checkpointing"),
            ("checkpoint", None),
            ("video", None),
        ]
        assert kinds == [*expected, ("metrics", 320)]  # after the queued and running statuses
        assert events[-1]["values"] == {"losses/actor": "NaN"}
        assert next(e for e in events if e["type"] == "phase")["since"] == 1234.5
        stored = next(e for e in events if e["type"] == "checkpoint")["checkpoint"]
        archive = service.client.get(stored["url"])
        with tarfile.open(fileobj=io.BytesIO(archive.content)) as tar:
            member = tar.extractfile("step_0000000160/state.bin")
            assert member is not None and member.read() == b"weights-160"
        listed = service.client.get(f"/api/runs/{run}/videos").json()["items"]
        assert [v["step"] for v in listed] == [160]
        assert service.client.get(listed[0]["url"]).content == video.read_bytes()
        got = reporter.checkpoint_input(run, None, run_dir)
        assert got is not None and got.step == 160
        assert not reporter.cancel_requested()
        assert service.client.post(f"/api/runs/{run}/cancel").status_code == 202
        deadline = time.monotonic() + 5
        while not reporter.cancel_requested() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reporter.cancel_requested()
    finally:
        reporter.close()
