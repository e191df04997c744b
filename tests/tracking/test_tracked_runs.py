"""Runs tracked from a script (``nnx_ppo.track``) against a real service: a script trains
PointReach and its run streams, survives a service restart with nothing lost, and its
checkpoint downloads and resumes as a queued run; a killed script's run is ``crashed``
after the (short) timeout; an offline run synced later is the same run, however often it
is synced; a full buffer drops reports without blocking and says so; a recording made in
the script uploads (online, or offline then synced) and lists, downloads and reads as the
service's own."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nnx_ppo.client.errors import ServiceUnavailable
from nnx_ppo.tracking import track
from nnx_ppo.tracking.http import ReportClient, ReportRefused
from nnx_ppo.tracking.offline import sync
from nnx_ppo.tracking.service import create_tracked_run
from nnx_ppo.tracking.transport import DROPPED_METRIC, Transport
from tests.service_harness import ROOT, TOKEN, Service, free_port

TIMEOUT_S = 6.0
"""The service's tracked-run timeout (short, but past a loaded CI machine's hiccups)."""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    env = {"NNX_PPO_TRACKED_TIMEOUT_SECONDS": str(TIMEOUT_S)}
    svc = Service(tmp_path_factory.mktemp("tracked") / "data", env=env).start()
    yield svc
    svc.close()


@contextlib.contextmanager
def started(module: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """``python -m module args`` (its stderr in a file), killed and closed on exit."""
    with tempfile.TemporaryFile("w+") as errors:
        script = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env={"PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"},
        )
        script.errors = errors  # type: ignore[attr-defined]
        try:
            yield script
        finally:
            script.kill()
            script.wait(10)
            assert script.stdout is not None
            script.stdout.close()


def stderr_of(script: subprocess.Popen[str]) -> str:
    errors = script.errors  # type: ignore[attr-defined]
    errors.seek(0)
    return str(errors.read()[-4000:])


def first_line(script: subprocess.Popen[str]) -> str:
    assert script.stdout is not None
    line = script.stdout.readline()
    assert line, stderr_of(script)
    return line


def metric_steps(service: Service, run_id: str, key: str = "losses/total") -> list[int]:
    response = service.client.get(f"/api/runs/{run_id}/metrics", params={"keys": key})
    assert response.status_code == 200, response.text
    series = response.json()["series"]
    return series[key]["step"] if key in series else []


def events(service: Service, run_id: str) -> list[dict]:
    return service.events(run_id, timeout=30)


def test_tracked_script_streams_survives_a_restart_and_resumes_on_the_service(
    service: Service, tmp_path: Path
) -> None:
    steps_file = tmp_path / "steps.txt"
    with started(
        "tests.tracking.track_script",
        *("--url", service.url, "--token", TOKEN, "--steps", "8000"),
        *("--pause", "0.4", "--steps-file", str(steps_file)),
    ) as script:
        run_id = json.loads(first_line(script))["id"]
        # Live: metrics arrive while the script still trains.
        run = service.wait_for(run_id, {"running"}, 600, lambda r: r["latest_metrics"])
        assert run["external"] is True and run["status"] == "running"
        assert script.poll() is None
        # The service goes down (API, worker) and comes back on the same port mid-run.
        service.kill()
        time.sleep(2.0)
        service.start()
        assert script.wait(300) == 0, stderr_of(script)
    run = service.wait_for(run_id, {"succeeded"}, 30)
    logged = [int(s) for s in steps_file.read_text().split()]
    assert len(logged) == 50  # 8000 steps of 16 envs x 10
    assert metric_steps(service, run_id) == logged  # nothing lost, nothing twice
    assert run["steps"] == 8000 and run["external"] is True
    stream = events(service, run_id)
    assert [e["checkpoint"]["step"] for e in stream if e["type"] == "checkpoint"] == [4000, 8000]
    assert any(e["type"] == "log" and e["line"] == "the script is done" for e in stream)
    assert "the script is done" in service.client.get(f"/api/runs/{run_id}/logs").text
    archive = service.client.get(f"/api/runs/{run_id}/checkpoints/8000")
    assert archive.status_code == 200 and archive.content[:2] == b"\x1f\x8b"

    # Its checkpoint resumes as a queued run, trained by the service's worker.
    spec = {**run["spec"], "resume_from": {"run_id": run_id}}
    spec["config"] = {**spec["config"], "ppo": {**spec["config"]["ppo"], "total_steps": 9600}}
    # (a long timeout: the restarted service's spec checker may still be starting)
    response = service.client.post("/api/runs", json=spec, timeout=300)
    assert response.status_code == 201, response.text
    resumed = response.json()
    assert resumed["external"] is False and resumed["steps"] == 8000
    done = service.wait_for(resumed["id"], timeout=300)
    assert done["status"] == "succeeded", service.client.get(f"/api/runs/{resumed['id']}/logs").text
    assert done["steps"] == 9600
    assert min(metric_steps(service, resumed["id"])) > 8000


def test_a_killed_script_is_crashed_after_the_timeout(service: Service) -> None:
    with started("tests.tracking.idle_script", service.url, TOKEN) as script:
        run_id = first_line(script).strip()
        service.wait_for(run_id, {"running"}, 10)
        time.sleep(TIMEOUT_S + 1.0)  # heartbeats keep a live script's run running
        run = service.run(run_id)
        assert run["status"] == "running", (run["error"], stderr_of(script))
    killed = time.monotonic()
    run = service.wait_for(run_id, {"crashed"}, TIMEOUT_S + 15)
    assert time.monotonic() - killed >= TIMEOUT_S - 1.0
    assert "no heartbeat" in run["error"]
    assert metric_steps(service, run_id) == [10, 20]
    assert run["attempts"] == 1  # never claimed by the worker, never requeued


def test_offline_then_sync_gives_the_same_run_once(service: Service, tmp_path: Path) -> None:
    steps_file = tmp_path / "steps.txt"
    unreachable = f"http://127.0.0.1:{free_port()}"
    with started(
        "tests.tracking.track_script",
        *("--url", unreachable, "--mode", "offline", "--dir", str(tmp_path / "offline")),
        *("--steps", "4000", "--steps-file", str(steps_file), "--name", "offline-run"),
    ) as script:
        assert script.wait(300) == 0, stderr_of(script)
    (folder,) = (tmp_path / "offline").iterdir()
    sync = [sys.executable, "-m", "server.cli", "sync", str(tmp_path / "offline")]
    sync += ["--url", service.url, "--token", TOKEN]
    first = subprocess.run(sync, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    run_id = first.stdout.split("run ")[-1].strip()
    run = service.run(run_id)
    assert (run["status"], run["name"], run["external"]) == ("succeeded", "offline-run", True)
    logged = [int(s) for s in steps_file.read_text().split()]
    assert metric_steps(service, run_id) == logged and len(logged) == 25
    assert service.client.get(f"/api/runs/{run_id}/checkpoints/4000").status_code == 200
    # Synced again (the folder is the same run): nothing new is stored.
    again = subprocess.run(sync, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and run_id in again.stdout, again.stderr
    assert service.run(run_id)["last_seq"] == run["last_seq"]
    assert (folder / "synced.json").exists()


def test_an_unreachable_service_is_a_clear_error_at_track() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServiceUnavailable, match=r"cannot reach .* mode=\"offline\""):
        track("nowhere", url=url, token="x" * 20)


def test_a_full_buffer_drops_without_blocking_and_reports_the_count(service: Service) -> None:
    run_id, run_token = create_tracked_run(
        service.url, TOKEN, name="drops", config={}, tags=(), notes="", total_steps=0
    )
    transport = Transport(
        ReportClient(service.url, run_id, run_token), capacity=2, put_timeout_s=0.0
    )
    started = time.monotonic()
    accepted = [
        transport.put({"type": "metrics", "step": s, "wall_time": 0.0, "values": {"x": 1.0}})
        for s in range(1, 201)
    ]
    assert time.monotonic() - started < 1.0  # never waits on the service
    assert transport.dropped == accepted.count(False) > 0
    time.sleep(0.5)
    last = 1000
    transport.put({"type": "metrics", "step": last, "wall_time": 0.0, "values": {"x": 2.0}})
    assert transport.flush(30)
    dropped = transport.dropped
    transport.close(5)
    series = service.client.get(f"/api/runs/{run_id}/metrics").json()["series"]
    assert series[DROPPED_METRIC]["value"][-1] == dropped
    stored = service.client.get(f"/api/runs/{run_id}").json()
    assert stored["steps"] == last
    lines = [e["line"] for e in events_until(service, run_id) if e["type"] == "log"]
    assert any(f"{dropped} report(s) did not fit" in line for line in lines)


def _recording_arrays() -> dict[str, Any]:
    """What ``record_activations_rollout`` gives (12 steps x 3 envs), with obs and rewards."""
    rng = np.random.default_rng(0)
    dones = np.zeros((12, 3), bool)
    dones[9:, 2] = True
    return {
        "activations": {
            "actor/layers/0": rng.normal(size=(12, 3, 5)).astype(np.float32),
            "critic/layers/0": rng.normal(size=(12, 3, 4)).astype(np.float32),
        },
        "dones": dones,
        "obs": rng.normal(size=(12, 3, 6)).astype(np.float32),
        "rewards": {"reach": rng.normal(size=(12, 3)).astype(np.float32)},
    }


def _check_uploaded(service: Service, run_id: str, arrays: dict[str, Any]) -> None:
    """The run has one recording, succeeded, that downloads as ``arrays`` and reads as
    the Recordings tab reads it."""
    (item,) = service.client.get(f"/api/runs/{run_id}/recordings").json()["items"]
    assert item["status"] == "succeeded", item
    assert (item["step"], item["seed"], item["n_envs"], item["episode_length"]) == (40, 7, 3, 12)
    manifest = service.client.get(item["url"]).json()["manifest"]
    assert manifest["populations"] == {"actor/layers/0": 5, "critic/layers/0": 4}
    assert manifest["env"]["name"] == "PointReach"
    data = service.client.get(item["data_url"])
    assert data.status_code == 200
    with np.load(io.BytesIO(data.content), allow_pickle=False) as npz:
        assert set(npz.files) == {*arrays["activations"], "dones", "obs", "rewards/reach"}
        for key, value in arrays["activations"].items():
            np.testing.assert_array_equal(npz[key], value)
        np.testing.assert_array_equal(npz["dones"], arrays["dones"])
        np.testing.assert_array_equal(npz["rewards/reach"], arrays["rewards"]["reach"])
    sliced = service.client.get(
        f"{item['url']}/slice", params={"key": "actor/layers/0", "env": 2}
    ).json()
    assert (sliced["units"], sliced["points"], sliced["stride"]) == (5, 12, 1)
    codes = np.frombuffer(base64.b64decode(sliced["codes"]), np.uint8).reshape(5, 12)
    low, high = sliced["min"], sliced["max"]
    want = arrays["activations"]["actor/layers/0"][:, 2].T  # env 2, units x time
    np.testing.assert_allclose(low + codes * (high - low) / 254, want, atol=(high - low) / 254)


def test_a_script_uploads_a_recording_online_and_offline(service: Service, tmp_path: Path):
    arrays = _recording_arrays()
    extra = {"step": 40, "seed": 7, "env": "PointReach"}
    with track("recorded", url=service.url, token=TOKEN) as run:
        run.upload_recording(**arrays, **extra)
    _check_uploaded(service, str(run.id), arrays)
    lines = [e["line"] for e in service.events(str(run.id)) if e["type"] == "log"]
    assert "recording uploaded: checkpoint step 40, 12 steps x 3 envs, 2 populations" in lines

    with track("recorded-offline", mode="offline", directory=tmp_path) as offline:
        offline.upload_recording(**arrays, **extra)
        with pytest.raises(ValueError, match="first axes are not dones"):
            offline.upload_recording(**{**arrays, "obs": arrays["obs"][:5]}, **extra)
    assert offline.directory is not None
    _check_uploaded(service, sync(offline.directory, service.url, TOKEN), arrays)


def test_a_recording_upload_is_checked_and_stored_once(service: Service, tmp_path: Path):
    run_id, run_token = create_tracked_run(
        service.url, TOKEN, name="uploads", config={}, tags=(), notes="", total_steps=0
    )
    client = ReportClient(service.url, run_id, run_token)
    try:
        not_npz = tmp_path / "x.npz"
        not_npz.write_bytes(b"not a zip")
        with pytest.raises(ReportRefused, match=r"\(422\).*not a \.npz file"):
            client.upload(f"/recordings/{'a' * 32}", not_npz)
        with pytest.raises(ReportRefused, match=r"\(422\).*32 hexadecimal digits"):
            client.upload("/recordings/Not-A-Name", not_npz)
        # A retried upload (the same name) is the recording stored the first time.
        with track("writer", mode="offline", directory=tmp_path / "w") as writer:
            writer.upload_recording(**_recording_arrays(), step=40, seed=7, env="PointReach")
        assert writer.directory is not None
        (upload,) = (writer.directory / "files").iterdir()
        for _ in range(2):
            client.upload(f"/recordings/{'b' * 32}", upload)
        items = service.client.get(f"/api/runs/{run_id}/recordings").json()["items"]
        assert [i["status"] for i in items] == ["succeeded"]
    finally:
        client.close()


def events_until(service: Service, run_id: str) -> list[dict]:
    """The run's stream so far (the run is still running: read until quiet)."""
    return service.events(run_id, timeout=3)
