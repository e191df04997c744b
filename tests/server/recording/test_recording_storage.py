"""``server.recording.storage`` and ``video_stream`` without a service or JAX: a recording
written chunk by chunk reads back whole (memory-mapped arrays, the ``.npz`` download), a
name clash with the extra arrays, and a video streamed in batches has one frame per step.
The dashboard's reads of it are ``test_recording_reads.py``'s."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from server.recording import storage
from server.recording.video_stream import Mp4Stream


def _write(directory: Path) -> tuple[dict[str, np.ndarray], dict]:
    rng = np.random.default_rng(0)
    full = {
        "pop": rng.normal(size=(10, 2, 3)).astype(np.float32),
        "dones": np.zeros((10, 2), bool),
        "obs": rng.normal(size=(10, 2, 4)).astype(np.float32),
    }
    full["dones"][4, 1] = True
    specs = [
        storage.ArraySpec("pop", "activations", (3,), "float32"),
        storage.ArraySpec("dones", "dones", (), "bool"),
        storage.ArraySpec("obs", "obs", (4,), "float32"),
    ]
    writer = storage.RecordingWriter(directory, 10, 2, specs)
    for t0 in range(0, 10, 4):  # chunks of 4, 4, 2 steps
        writer.write(t0, {k: v[t0 : t0 + 4] for k, v in full.items()})
    return full, writer.close(step=7, seed=1, n_envs=2, episode_length=10)


def test_chunks_read_back_whole_and_as_an_npz(tmp_path: Path) -> None:
    staging = storage.staging_dir(tmp_path, 3)
    full, manifest = _write(staging)
    assert manifest["populations"] == {"pop": 3}
    assert manifest["arrays"]["obs"]["shape"] == [10, 2, 4]
    size = storage.publish(staging, storage.recording_dir(tmp_path, 3))
    directory = storage.recording_dir(tmp_path, 3)
    assert size == storage.tree_size(directory) and not staging.exists()
    assert storage.read_manifest(directory) == manifest
    for name, values in full.items():
        np.testing.assert_array_equal(storage.open_array(directory, manifest, name), values)
    with np.load(storage.npz_file(directory), allow_pickle=False) as data:
        assert sorted(data.files) == ["dones", "obs", "pop"]
        np.testing.assert_array_equal(data["pop"], full["pop"])


def test_an_activation_named_like_an_extra_array_is_prefixed() -> None:
    assert storage.activation_name("actor/layers/0") == "actor/layers/0"
    assert storage.activation_name("obs") == "activations/obs"
    assert storage.activation_name("rewards/x") == "activations/rewards/x"


def test_a_video_streamed_in_batches_has_a_frame_per_step(tmp_path: Path) -> None:
    import imageio_ffmpeg

    video = Mp4Stream(tmp_path / "v.mp4", 30.0)
    for _ in range(3):  # chunks of 4 steps, odd frame size (padded to even)
        video.write(np.full((4, 15, 21, 3), 128, np.uint8))
    with pytest.raises(ValueError, match="after frames of"):
        video.write(np.zeros((1, 8, 8, 3), np.uint8))
    video.close()
    count, _ = imageio_ffmpeg.count_frames_and_secs(str(tmp_path / "v.mp4"))
    assert count == video.frames == 12
