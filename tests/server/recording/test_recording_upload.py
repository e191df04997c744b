"""``server.recording.upload`` without a service: a script's ``.npz`` becomes a stored
recording that reads back as the job's do (the same names, the ``.npz`` download), and
what is not a recording is refused naming what is wrong, leaving nothing behind."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from server.recording import storage, upload


def _npz(path: Path, arrays: dict[str, np.ndarray], meta: Any = None) -> Path:
    """An upload as ``TrackedRun.upload_recording`` writes it."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w") as member:
                np.lib.format.write_array(member, array, allow_pickle=False)
        if meta is not None:
            archive.writestr(upload.META, meta if isinstance(meta, str) else json.dumps(meta))
    return path


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    dones = np.zeros((6, 2), bool)
    dones[4:, 0] = True
    return {
        "activations/actor/layers/0": rng.normal(size=(6, 2, 5)),  # float64: stored float32
        "activations/obs": rng.normal(size=(6, 2, 3)).astype(np.float32),  # an extra's name
        "dones": dones,
        "obs": rng.normal(size=(6, 2, 4)).astype(np.float32),
        "rewards/reach": rng.normal(size=(6, 2)),
        "actions": rng.normal(size=(6, 2, 2)).astype(np.float32),
    }


META = {"step": 40, "seed": 3, "env": {"name": "PointReach", "overrides": {"x": 1}}}


def test_an_upload_is_stored_as_a_recording_of_the_service_is(tmp_path: Path) -> None:
    arrays = _arrays()
    staging, manifest = upload.stage_upload(
        _npz(tmp_path / "up.npz", arrays, META), tmp_path / "run", "r1", 10**6
    )
    assert staging.parent == storage.recordings_dir(tmp_path / "run")
    assert staging.name.startswith(".staging-")  # hidden until published
    assert (manifest["step"], manifest["seed"], manifest["run_id"]) == (40, 3, "r1")
    assert manifest["env"] == META["env"] and manifest["source"] == "uploaded"
    assert (manifest["n_envs"], manifest["episode_length"], manifest["video"]) == (2, 6, None)
    assert manifest["populations"] == {"actor/layers/0": 5, "activations/obs": 3}
    stored = storage.read_manifest(staging)
    assert stored == manifest
    read = {
        name: np.asarray(storage.open_array(staging, manifest, name)) for name in stored["arrays"]
    }
    assert read["actor/layers/0"].dtype == np.float32
    np.testing.assert_allclose(read["actor/layers/0"], arrays["activations/actor/layers/0"], 1e-6)
    np.testing.assert_array_equal(read["activations/obs"], arrays["activations/obs"])
    for name in ("dones", "obs", "rewards/reach", "actions"):
        np.testing.assert_array_equal(read[name], arrays[name])
        assert read[name].dtype == arrays[name].dtype
    with np.load(storage.npz_file(staging), allow_pickle=False) as npz:
        assert set(npz.files) == set(read)


@pytest.mark.parametrize(
    ("change", "meta", "message"),
    [
        ({"dones": None}, META, "has no dones"),
        ({"dones": np.zeros((6, 2), np.float32)}, META, "dones must be [T, N] bool"),
        ({"obs": np.zeros((5, 2, 4))}, META, "it must be [T=6, N=2, ...]"),
        ({"activations/actor/layers/0": None, "activations/obs": None}, META, "no activations"),
        ({"weights": np.zeros((6, 2))}, META, "is not a recording's array"),
        ({"activations/": np.zeros((6, 2, 1))}, META, "needs its key"),
        ({"activations/a b": np.zeros((6, 2, 1))}, META, "its key must match"),
        ({"obs": np.array([["x"] * 2] * 6)}, META, "numbers or bools only"),
        ({}, {"seed": 1}, "step must be an integer"),
        ({}, {"step": -1}, "step must be an integer"),
        ({}, {"step": 1, "seed": "s"}, "seed must be an integer"),
        ({}, {"step": 1, "env": {"overrides": []}}, "env must be"),
        ({}, {"step": 1, "env": "PointReach"}, "env must be"),
        ({}, "{not json", "is not JSON"),
        ({"activations/big": np.zeros((6, 2, 30_000), np.float32)}, META, "above the limit"),
    ],
)
def test_what_is_not_a_recording_is_refused_and_nothing_is_left(
    tmp_path: Path, change: dict[str, Any], meta: Any, message: str
) -> None:
    arrays = {**_arrays(), **change}
    path = _npz(tmp_path / "up.npz", {k: v for k, v in arrays.items() if v is not None}, meta)
    with pytest.raises(upload.BadRecording, match=re.escape(message)):
        upload.stage_upload(path, tmp_path / "run", "r1", 10**6)
    recordings = storage.recordings_dir(tmp_path / "run")
    assert not recordings.exists() or list(recordings.iterdir()) == []


def test_a_file_that_is_not_an_npz_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "up.npz"
    np.save(path, np.zeros(3))  # a .npy, not a .npz
    with pytest.raises(upload.BadRecording, match=r"not a \.npz file"):
        upload.stage_upload(path, tmp_path / "run", "r1", 10**6)
