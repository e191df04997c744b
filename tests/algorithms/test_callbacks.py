"""``wandb_video_fn``: logs an MP4 to an offline W&B run; a clear error without wandb."""

from __future__ import annotations

import importlib.util
import sys

import imageio_ffmpeg
import numpy as np
import pytest

from nnx_ppo.algorithms.callbacks import wandb_video_fn
from nnx_ppo.algorithms.config import VideoData

HAS_WANDB = importlib.util.find_spec("wandb") is not None


def video(step: int = 96) -> VideoData:
    frames = np.zeros((6, 32, 48, 3), np.uint8)
    frames[:, :, :24, 0] = np.arange(6)[:, None, None] * 40  # a red half that brightens
    return VideoData(frames=frames, step=step, episode_reward=2.5, episode_length=5)


@pytest.fixture
def offline_run(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = wandb.init(mode="offline", dir=tmp_path, project="nnx-ppo-test")
    yield run
    if wandb.run is not None:
        wandb.finish()


@pytest.mark.skipif(not HAS_WANDB, reason="wandb is not installed (the 'wandb' extra)")
def test_video_lands_in_the_offline_run(offline_run, tmp_path):
    import wandb

    run_dir = offline_run.dir  # .../wandb/offline-run-<time>-<id>/files
    log_video = wandb_video_fn(key="eval_video", fps=20)
    log_video(video(step=96))
    assert offline_run.step == 96  # logged at the video's training step
    wandb.finish()
    videos = list((tmp_path / "wandb").glob("offline-run-*/files/media/videos/*"))
    assert len(videos) == 1, videos
    (path,) = videos
    assert str(path).startswith(run_dir) and path.is_file()
    assert path.name.startswith("eval_video_") and path.suffix == ".mp4"
    assert path.read_bytes()[4:8] == b"ftyp"  # an MP4, as encode_mp4 writes it
    # All 6 frames, at the callback's 20 fps: 0.3 s.
    n_frames, seconds = imageio_ffmpeg.count_frames_and_secs(str(path))
    assert n_frames == 6 and seconds == pytest.approx(0.3, abs=0.01)


@pytest.mark.skipif(not HAS_WANDB, reason="wandb is not installed (the 'wandb' extra)")
def test_video_outside_a_run_is_an_error():
    import wandb

    assert wandb.run is None
    with pytest.raises(RuntimeError, match=r"wandb\.init"):
        wandb_video_fn()(video())


def test_missing_wandb_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # makes `import wandb` fail
    # Fails when the callback is created, before training starts.
    with pytest.raises(ImportError, match=r"nnx-ppo\[wandb\]"):
        wandb_video_fn()
