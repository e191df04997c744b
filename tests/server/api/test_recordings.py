"""Activation recordings through the service (``server.recording``): a real service (its
recording runner starts a spawned child per job) and a checkpoint of a small recurrent
network on the built-in ``MemoryCue`` env (episodes of 6 steps), written into a run's
directory. Checked: the recorded activations equal ``record_activations_rollout``'s up to
each env's first episode end and the network's state is reset at ``dones``; the download
reads in plain NumPy; the slice and PCA reads; the 422s; a job killed mid-recording fails
and leaves nothing listed; a running job is cancelled."""

from __future__ import annotations

import base64
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from server.recording import reads
from tests.service_harness import TOKEN, Service, refused_locs

NETWORK = {"kind": "lstm", "lstm_size": 8, "actor_hidden_sizes": [8], "critic_hidden_sizes": [8]}
MAX_BYTES = 10_000_000
N_ENVS, LENGTH, SEED = 3, 23, 5


def _spec() -> dict[str, Any]:
    return {
        "kind": "ppo",
        "env": {"name": "MemoryCue"},
        "preset": False,
        "network": NETWORK,
        "config": {"ppo": {"n_envs": 4, "rollout_length": 4, "total_steps": 1000}},
    }


def _network() -> Any:
    from nnx_ppo import envs
    from nnx_ppo.presets import make_networks

    env = envs.load("MemoryCue")
    return env, make_networks(NETWORK, env.observation_size, env.action_size, 3)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    env = {
        "NNX_PPO_RECORDING_MAX_BYTES": str(MAX_BYTES),
        "NNX_PPO_RECORDING_CHUNK_BYTES": "1024",  # a step or two per chunk: many chunks
    }
    svc = Service(tmp_path_factory.mktemp("recordings") / "data", worker=False, env=env)
    yield svc.start()
    svc.close()


@pytest.fixture(scope="module")
def run_id(service: Service) -> str:
    """A cancelled run with a checkpoint at step 96 (written here, as a run would)."""
    from nnx_ppo.algorithms.checkpointing import save_checkpoint
    from nnx_ppo.algorithms.step import new_training_state

    run = _submit(service)
    env, network = _network()
    checkpoints = service.data_dir / "runs" / run["id"] / "checkpoints"
    save_checkpoint(str(checkpoints), new_training_state(env, network, 4, 0), 96)
    assert service.client.post(f"/api/runs/{run['id']}/cancel").status_code == 202
    service.wait_for(run["id"], ["cancelled"], timeout=30)
    return str(run["id"])


def _submit(service: Service) -> dict[str, Any]:
    response = service.client.post("/api/runs", json=_spec(), timeout=240)  # the checker starts
    assert response.status_code == 201, response.text
    return dict(response.json())


def _wait(service: Service, run_id: str, rec: int, statuses: tuple[str, ...]) -> dict:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        got = service.client.get(f"/api/runs/{run_id}/recordings/{rec}").json()
        if got["status"] in statuses:
            return got
        time.sleep(0.3)
    raise TimeoutError(f"recording {rec} is {got['status']}:\n{service.log()}")


def _recorder(network: Any) -> Any:
    from nnx_ppo.networks.recording import with_recording

    recorder: Any = with_recording(network)
    recorder.eval()
    return recorder


def test_a_recording_equals_the_library_rollout_and_resets_at_dones(
    service: Service, run_id: str
) -> None:
    import jax

    from nnx_ppo.algorithms.activations import record_activations_rollout
    from nnx_ppo.algorithms.checkpointing import load_networks
    from nnx_ppo.client import Client

    client = Client(service.url, TOKEN)
    recording = client.record(
        run_id, n_envs=N_ENVS, episode_length=LENGTH, seed=SEED, wait=True, timeout=240
    )
    assert recording.status == "succeeded", recording.error
    assert recording.step == 96 and recording.bytes and recording.bytes > 0
    arrays = client.load_recording(run_id, recording.id)
    manifest = client.recording(run_id, recording.id).manifest
    assert manifest is not None and manifest["step"] == 96 and manifest["seed"] == SEED
    assert manifest["env"]["name"] == "MemoryCue" and manifest["chunk_steps"] < LENGTH

    env, network = _network()
    checkpoint = service.data_dir / "runs" / run_id / "checkpoints" / "step_0000000096"
    load_networks(str(checkpoint), network)
    expected, first_dones = record_activations_rollout(
        env, network, N_ENVS, LENGTH, jax.random.key(SEED)
    )
    assert set(manifest["populations"]) == set(expected)
    assert manifest["populations"]["layers/2/action/layers/0"] == 8  # the LSTM's h
    before_first_end = ~np.asarray(first_dones)  # [T, N]
    dones = arrays["dones"]
    assert dones.shape == (LENGTH, N_ENVS) and dones.dtype == bool
    # The library's pre-step mask is set from the first end on; here each end resets.
    np.testing.assert_array_equal(np.cumsum(dones, axis=0) > 0, np.asarray(first_dones))
    assert 2 <= dones[:, 0].sum() < LENGTH  # episodes of 6 steps: several resets
    for key, values in expected.items():
        got = arrays[key]
        assert got.shape == (LENGTH, N_ENVS, np.asarray(values).shape[-1]), key
        np.testing.assert_allclose(
            got[before_first_end], np.asarray(values)[before_first_end], atol=1e-6
        )
    assert arrays["obs"].shape[:2] == (LENGTH, N_ENVS)
    assert arrays["actions"].shape == (LENGTH, N_ENVS, env.action_size)
    assert arrays["rewards"].shape == (LENGTH, N_ENVS)

    # At a reset the LSTM starts from its initial state: h is the fresh network's on the
    # step's observation; elsewhere (carried state) it is not.
    recorder = _recorder(network)
    fresh = lambda t, b: np.asarray(  # noqa: E731
        recorder(recorder.initialize_state(1), arrays["obs"][t, b][None]).metrics[
            "activations/layers/2/action/layers/0"
        ][0]
    )
    resets = list(zip(*np.nonzero(dones), strict=True))
    for t, b in resets:
        np.testing.assert_allclose(arrays["layers/2/action/layers/0"][t, b], fresh(t, b), atol=1e-5)
    carried = [(t, b) for t in range(1, LENGTH) for b in range(N_ENVS) if not dones[t, b]]
    lstm_h = arrays["layers/2/action/layers/0"]
    assert all(not np.allclose(lstm_h[t, b], fresh(t, b)) for t, b in carried)
    client.close()


def test_the_list_the_reads_and_the_stream(service: Service, run_id: str) -> None:
    base = f"/api/runs/{run_id}/recordings"
    items = service.client.get(base).json()["items"]
    done = next(r for r in items if r["status"] == "succeeded")
    assert {"id", "status", "step", "n_envs", "episode_length", "bytes"} <= set(done)
    assert "manifest" not in done
    path = service.data_dir / "runs" / run_id / "recordings" / str(done["id"]) / "data.npz"
    response = service.client.get(f"{base}/{done['id']}/data")
    assert response.status_code == 200
    path.write_bytes(response.content)
    with np.load(path, allow_pickle=False) as data:
        assert "layers/2/action/layers/0" in data.files and data["dones"].shape == (LENGTH, N_ENVS)
        h = data["layers/2/action/layers/0"]

    key = "layers/2/action/layers/0"
    sliced = service.client.get(
        f"{base}/{done['id']}/slice", params={"key": key, "env": 1, "t1": 20, "max_points": 8}
    ).json()
    assert sliced["stride"] == 3 and sliced["steps"] == [0, 3, 6, 9, 12, 15, 18]
    assert (sliced["units"], sliced["points"]) == (8, 7)
    codes = np.frombuffer(base64.b64decode(sliced["codes"]), np.uint8).reshape(8, 7)
    values = reads.dequantize(codes, sliced["min"], sliced["max"])
    # The point of steps 3..5 is their mean; the last point holds steps 18 and 19; each
    # within half of one of the 254 levels between the slice's min and max.
    half_level = (sliced["max"] - sliced["min"]) / (2 * reads.LEVELS) * 1.001
    np.testing.assert_allclose(values[2][1], h[3:6, 1, 2].mean(), atol=half_level)
    np.testing.assert_allclose(values[2][6], h[18:20, 1, 2].mean(), atol=half_level)
    assert sliced["dones"][2] == bool(np.load(path)["dones"][6:9, 1].any())

    pca = service.client.get(f"{base}/{done['id']}/pca", params={"key": key, "env": 0}).json()
    assert len(pca["points"]) == LENGTH and len(pca["loadings"][0]) == 8
    centred = h[:, 0] - h[:, 0].mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    sign = np.sign(vt[0][np.argmax(np.abs(vt[0]))])
    np.testing.assert_allclose(np.asarray(pca["points"])[:, 0], centred @ vt[0] * sign, atol=1e-4)
    np.testing.assert_allclose(pca["explained_variance"][0], s[0] ** 2 / (s**2).sum(), rtol=1e-4)

    bad_key = service.client.get(f"{base}/{done['id']}/slice", params={"key": "dones"})
    assert refused_locs(bad_key) == [["query", "key"]]
    bad_env = service.client.get(f"{base}/{done['id']}/pca", params={"key": key, "env": 3})
    assert refused_locs(bad_env) == [["query", "env"]]
    no_video = service.client.get(f"{base}/{done['id']}/video")
    assert no_video.status_code == 404

    last_status = max(e["seq"] for e in service.events(run_id, timeout=10) if e["type"] == "status")
    events = service.events(run_id, after_seq=last_status, timeout=3)
    mine = [e["recording"]["status"] for e in events if e["recording"]["id"] == done["id"]]
    assert mine == ["queued", "running", "succeeded"]


def test_bad_requests_are_422s_naming_the_field(service: Service, run_id: str) -> None:
    base = f"/api/runs/{run_id}/recordings"
    good = {"n_envs": 2, "episode_length": 10}
    assert refused_locs(service.client.post(base, json={**good, "n_envs": 0})) == [
        ["body", "n_envs"]
    ]
    missing_step = service.client.post(base, json={**good, "step": 95})
    assert refused_locs(missing_step) == [["body", "step"]]
    assert "no checkpoint at step 95" in missing_step.text
    too_large = service.client.post(
        base, json={"n_envs": 100, "episode_length": 100_000}, timeout=240
    )  # the checker traces the network's activations
    assert refused_locs(too_large) == [["body", "episode_length"], ["body", "n_envs"]]
    size = 100 * 100_000 * 35 * 4  # T x N x units (8 + 8 + 2 + 8 + 8 + 1) x 4 bytes
    assert f"{size} bytes" in too_large.text and str(MAX_BYTES) in too_large.text
    video = service.client.post(base, json={**good, "video": True})
    assert refused_locs(video) == [["body", "video"]]

    bare = _submit(service)  # queued, no checkpoint
    no_checkpoint = service.client.post(f"/api/runs/{bare['id']}/recordings", json=good)
    assert refused_locs(no_checkpoint) == [["body", "step"]]
    assert "has no checkpoint" in no_checkpoint.text
    assert service.client.post("/api/runs/0123456789ab/recordings", json=good).status_code == 404


def _started(service: Service, run_id: str, body: dict) -> tuple[dict, Path]:
    """A long recording, once its child has written its first chunks."""
    base = f"/api/runs/{run_id}/recordings"
    created = service.client.post(base, json=body)
    assert created.status_code == 201, created.text
    rec = _wait(service, run_id, created.json()["id"], ("running", "failed"))
    assert rec["status"] == "running", rec
    folder = service.data_dir / "runs" / run_id / "recordings"
    deadline = time.monotonic() + 120
    while not list(folder.glob(".staging-*/arrays/*.npy")):
        assert time.monotonic() < deadline, service.log()
        time.sleep(0.2)
    time.sleep(1.0)  # some chunks in
    return _wait(service, run_id, rec["id"], ("running",)), folder


def test_a_killed_job_fails_and_a_cancelled_one_ends_leaving_no_files(
    service: Service, run_id: str
) -> None:
    base = f"/api/runs/{run_id}/recordings"
    long = {"n_envs": N_ENVS, "episode_length": 20_000}
    rec, folder = _started(service, run_id, long)
    assert rec["bytes"] is None
    pid = _child_pid(service, run_id, rec["id"])
    os.kill(pid, signal.SIGKILL)
    failed = _wait(service, run_id, rec["id"], ("failed", "succeeded"))
    assert failed["status"] == "failed" and "died" in failed["error"], failed
    assert failed["bytes"] is None and failed["manifest"] is None
    assert not (folder / str(rec["id"])).exists()
    assert not list(folder.glob(".staging-*"))
    assert service.client.get(f"{base}/{rec['id']}/data").status_code == 409

    rec, _ = _started(service, run_id, long)
    cancel = service.client.post(f"{base}/{rec['id']}/cancel")
    assert cancel.status_code == 202 and cancel.json()["cancel_requested"]
    cancelled = _wait(service, run_id, rec["id"], ("cancelled", "failed", "succeeded"))
    assert cancelled["status"] == "cancelled"
    assert not (folder / str(rec["id"])).exists() and not list(folder.glob(".staging-*"))
    assert service.client.post(f"{base}/{rec['id']}/cancel").status_code == 409


def _child_pid(service: Service, run_id: str, rec: int) -> int:
    """The recording process's pid, from the database (the API does not show it)."""
    import sqlite3

    with sqlite3.connect(service.data_dir / "nnx_ppo.db") as db:
        (pid,) = db.execute("SELECT pid FROM recordings WHERE id = ?", (rec,)).fetchone()
    assert pid, f"recording {rec} of {run_id} has no pid"
    return int(pid)
