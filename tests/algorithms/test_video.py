"""Videos: ``encode_mp4`` (decoded back and inspected), ``VideoRecorder``, and the video
schedule of ``train_ppo``.

The schedule tests use ``DrawnPointReach``: the pure-JAX PointReach env with a ``render``
that draws frame ``t`` as a flat image of value ``10 * t`` (``t`` = steps since reset), so
they run in seconds and every frame is predictable. A real MuJoCo Playground env
(CartpoleBalance) is rendered in one slow test.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import subprocess
from typing import Any

import imageio_ffmpeg
import jax
import numpy as np
import optax
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import host_loop, training
from nnx_ppo.algorithms.config import EvalConfig, PPOConfig, TrainConfig, VideoConfig, VideoData
from nnx_ppo.algorithms.render_rollout import eval_rollout_for_render_scan
from nnx_ppo.algorithms.training import train_ppo
from nnx_ppo.algorithms.video import DEFAULT_RENDER_KWARGS, VideoRecorder, encode_mp4
from nnx_ppo.envs import EpisodeWrapper, PointReach
from nnx_ppo.networks.factories import make_mlp_actor_critic

# ---------------------------------------------------------------------------- encode_mp4


def pattern(n_frames: int, height: int, width: int) -> np.ndarray:
    """Frames with large flat blocks (which H.264 keeps nearly exactly): a left half whose
    red level grows 15 per frame, a constant green right half, a blue bottom band."""
    frames = np.zeros((n_frames, height, width, 3), np.uint8)
    for t in range(n_frames):
        frames[t, :, : width // 2, 0] = 40 + 15 * t
        frames[t, :, width // 2 :, 1] = 200
        frames[t, height * 3 // 4 :, :, 2] = 160
    return frames


def stream_description(path: pathlib.Path) -> str:
    """ffmpeg's one-line description of the video stream (``ffmpeg -i`` prints it), e.g.
    ``h264 (High) (avc1 / 0x31637661), yuv420p(progressive), 64x48, ..., 25 fps, ...``."""
    result = subprocess.run(
        [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-i", str(path)],
        capture_output=True,
        text=True,
    )
    match = re.search(r"Stream #0:0.*Video: (.*)", result.stderr)
    assert match, result.stderr
    return match.group(1)


def decode(path: pathlib.Path) -> tuple[float, np.ndarray]:
    """The video's frame rate and its frames, decoded to RGB ``[T, H, W, 3]``."""
    stream = stream_description(path)
    width, height = (int(n) for n in re.search(r", (\d+)x(\d+)\b", stream).groups())
    fps = float(re.search(r"([\d.]+) fps", stream).group(1))
    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(path)]
    command += ["-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
    raw = subprocess.run(command, capture_output=True, check=True).stdout
    return fps, np.frombuffer(raw, np.uint8).reshape(-1, height, width, 3)


def top_level_atoms(path: pathlib.Path) -> list[str]:
    """Types of the MP4's top-level boxes, in file order (size, then 4-character type)."""
    data, atoms, offset = path.read_bytes(), [], 0
    while offset + 8 <= len(data):
        size = int.from_bytes(data[offset : offset + 4], "big")
        kind = data[offset + 4 : offset + 8].decode("latin-1")
        if size == 1:  # 64-bit size follows the type
            size = int.from_bytes(data[offset + 8 : offset + 16], "big")
        atoms.append(kind)
        if size == 0:  # extends to the end of the file
            break
        offset += size
    return atoms


def test_encode_mp4_decodes_back_to_the_frames(tmp_path):
    frames = pattern(12, 48, 64)
    path = encode_mp4(frames, tmp_path / "video.mp4", fps=25)
    assert path == tmp_path / "video.mp4"
    fps, decoded = decode(path)
    assert decoded.shape == (12, 48, 64, 3)
    assert fps == 25
    # Lossy, but flat blocks come back within a few levels; frame t's red half is 40 + 15 t.
    error = np.abs(decoded.astype(np.int16) - frames.astype(np.int16))
    assert error.mean() < 3.0
    assert np.all(np.abs(decoded[:, 10, 10, 0].astype(int) - (40 + 15 * np.arange(12))) <= 6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["video.mp4"]  # no temp file left


def test_encode_mp4_is_browser_playable_h264(tmp_path):
    path = encode_mp4(pattern(5, 48, 64), tmp_path / "video.mp4")
    stream = stream_description(path)
    assert stream.startswith("h264"), stream
    assert "yuv420p" in stream and "64x48" in stream, stream
    atoms = top_level_atoms(path)
    assert atoms[0] == "ftyp"
    assert atoms.index("moov") < atoms.index("mdat")  # faststart: the index comes first


def test_encode_mp4_pads_odd_sizes_to_even(tmp_path):
    frames = pattern(3, 33, 47)
    path = encode_mp4(
        VideoData(frames, step=7, episode_reward=1.0, episode_length=2), tmp_path / "o.mp4"
    )
    _, decoded = decode(path)
    # One repeated row and column: 33 x 47 -> 34 x 48.
    assert decoded.shape == (3, 34, 48, 3)
    error = np.abs(decoded[:, :33, :47].astype(np.int16) - frames.astype(np.int16))
    assert np.median(error) <= 2  # colours bleed a little across the odd-placed block edges
    # The padding repeats the edge: the extra row/column look like the last real ones.
    np.testing.assert_allclose(decoded[:, 33], decoded[:, 32], atol=6)
    np.testing.assert_allclose(decoded[:, :, 47], decoded[:, :, 46], atol=6)


@pytest.mark.parametrize(
    ("frames", "match"),
    [
        (np.zeros((4, 8, 8, 3), np.float32), "uint8"),
        (np.zeros((4, 8, 8), np.uint8), r"\[T, H, W, 3\]"),
        (np.zeros((0, 8, 8, 3), np.uint8), "non-empty"),
    ],
)
def test_encode_mp4_rejects_bad_frames_and_leaves_the_old_file(tmp_path, frames, match):
    path = tmp_path / "video.mp4"
    path.write_bytes(b"old")
    with pytest.raises(ValueError, match=match):
        encode_mp4(frames, path)
    assert path.read_bytes() == b"old"


def test_encode_mp4_failure_keeps_the_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "video.mp4"
    path.write_bytes(b"old")
    monkeypatch.setattr(imageio_ffmpeg, "get_ffmpeg_exe", lambda: "false")  # exits 1
    with pytest.raises(RuntimeError, match="ffmpeg failed"):
        encode_mp4(pattern(2, 8, 8), path)
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["video.mp4"]


# ------------------------------------------------------------------ recorder and schedule


class DrawnPointReach(EpisodeWrapper):
    """PointReach whose ``render`` draws frame ``t`` as a flat ``10 * t`` image."""

    def __init__(self, episode_length: int) -> None:
        super().__init__(PointReach(), episode_length)
        self.render_calls: list[dict[str, Any]] = []

    def render(self, trajectory: list[Any], height: int = 1, width: int = 1, camera=None):
        self.render_calls.append({"height": height, "width": width, "camera": camera})
        steps = [int(state.info["steps"]) for state in trajectory]
        return [np.full((height, width, 3), 10 * t, np.uint8) for t in steps]


ENV = envs.load("PointReach", {"episode_length": 20})
N_ENVS, ROLLOUT = 8, 4
PER_ITERATION = N_ENVS * ROLLOUT  # 32
TOTAL = 352  # 11 iterations
VIDEO_EVERY, VIDEO_STEPS = 100, 6
CONFIG = TrainConfig(
    ppo=PPOConfig(
        n_envs=N_ENVS, rollout_length=ROLLOUT, total_steps=TOTAL, n_epochs=1, n_minibatches=2
    ),
    eval=EvalConfig(enabled=False),
    video=VideoConfig(
        enabled=True,
        every_steps=VIDEO_EVERY,
        episode_length=VIDEO_STEPS,
        render_kwargs={"height": 6, "width": 10, "camera": "track"},
    ),
    seed=3,
)


def make_networks(env=ENV):
    return make_mlp_actor_critic(
        env.observation_size,
        env.action_size,
        rngs=nnx.Rngs(0),
        actor_hidden_sizes=(8,),
        critic_hidden_sizes=(8,),
    )


@dataclasses.dataclass
class VideoRun:
    videos: list[VideoData]
    events: list[tuple[str, int]]  # ("log" | "video", step) in call order
    recorders: list[VideoRecorder]
    eval_env: DrawnPointReach


def train_with_video(monkeypatch, config=CONFIG, eval_length=4, **kwargs) -> VideoRun:
    recorders: list[VideoRecorder] = []

    class SpyRecorder(VideoRecorder):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            recorders.append(self)

    monkeypatch.setattr(host_loop, "VideoRecorder", SpyRecorder)
    videos, events = [], []

    def video_fn(video: VideoData) -> None:
        videos.append(video)
        events.append(("video", video.step))

    eval_env = DrawnPointReach(eval_length)
    train_ppo(
        ENV,
        make_networks(),
        config,
        log_fn=lambda metrics, step: events.append(("log", step)),
        video_fn=video_fn,
        eval_env=eval_env,
        **kwargs,
    )
    return VideoRun(videos, events, recorders, eval_env)


def test_train_ppo_records_videos_when_the_step_count_passes_each_multiple(monkeypatch):
    run = train_with_video(monkeypatch)
    # Iterations end at 32, 64, ..., 352. Multiples of 100 are first passed at 128 (100),
    # 224 (200) and 320 (300). The end, 352, passes none: no video there.
    assert [video.step for video in run.videos] == [128, 224, 320]
    # Each video comes right after the log_fn call of its step (so step-ordered loggers
    # such as W&B accept it), and log_fn still sees every iteration.
    logged = [step for kind, step in run.events if kind == "log"]
    assert logged == [PER_ITERATION * k for k in range(1, 12)]
    for video in run.videos:
        at = run.events.index(("video", video.step))
        assert run.events[at - 1] == ("log", video.step)
    # The eval env's episodes end after 4 steps (< the 6 the video asks for): frames are the
    # reset state and 4 steps, drawn 0, 10, 20, 30, 40, at the configured 6 x 10 size.
    for video in run.videos:
        assert video.frames.shape == (5, 6, 10, 3) and video.frames.dtype == np.uint8
        np.testing.assert_array_equal(video.frames[:, 0, 0, 0], [0, 10, 20, 30, 40])
        assert video.episode_length == 4
        assert 0 < video.episode_reward <= 4  # PointReach rewards are in (0, 1] per step
    assert run.eval_env.render_calls == [{"height": 6, "width": 10, "camera": "track"}] * 3
    # One recorder whose rollout compiled once, yet saw the parameters of each step: the
    # policy changes with training, and so does the deterministic episode's reward.
    (recorder,) = run.recorders
    assert recorder.rollout._cache_size() == 1
    assert len({video.episode_reward for video in run.videos}) == 3


def test_video_steps_stop_iteration_chunks(monkeypatch):
    # Every 64 steps: 64, 128, ..., 320 (not 352: the end is no multiple).
    config = dataclasses.replace(CONFIG, video=dataclasses.replace(CONFIG.video, every_steps=64))
    run = train_with_video(monkeypatch, config)
    assert [video.step for video in run.videos] == [64, 128, 192, 256, 320]


def test_video_recorder_defaults_and_matches_the_rollout():
    env = DrawnPointReach(20)
    networks = make_networks(env)
    optimizer = nnx.Optimizer(networks, optax.adam(1e-3), wrt=nnx.Param)
    graphdef, state = nnx.split((networks, optimizer))
    recorder = VideoRecorder(env, graphdef, VIDEO_STEPS)
    key = jax.random.key(5)
    video = recorder(state, key, step=1234)
    # Never done within 6 steps: the reset frame and 6 steps, at the default size.
    size = (DEFAULT_RENDER_KWARGS["height"], DEFAULT_RENDER_KWARGS["width"])
    assert video.frames.shape == (VIDEO_STEPS + 1, *size, 3)
    assert (video.step, video.episode_length) == (1234, VIDEO_STEPS)
    _, _, reward = eval_rollout_for_render_scan(env, networks, VIDEO_STEPS, key)
    assert video.episode_reward == pytest.approx(float(reward), rel=1e-5)


def test_video_on_an_env_without_render_fails_before_compiling(monkeypatch):
    def must_not_run(*args, **kwargs):
        raise AssertionError("train_ppo went on to build the training state")

    monkeypatch.setattr(training, "new_training_state", must_not_run)
    with pytest.raises(ValueError, match="no render method"):
        train_ppo(ENV, make_networks(), CONFIG, video_fn=lambda video: None)


@pytest.mark.parametrize("case", ["disabled", "no video_fn"])
def test_no_video_without_both_enabled_and_video_fn(monkeypatch, case):
    # A built-in env cannot render; that is fine unless a video would be recorded.
    calls = []
    if case == "disabled":
        config = dataclasses.replace(CONFIG, video=dataclasses.replace(CONFIG.video, enabled=False))
        video_fn = calls.append
    else:
        config, video_fn = CONFIG, None
    result = train_ppo(ENV, make_networks(), config, video_fn=video_fn)
    assert result.total_steps == TOTAL and calls == []


# --------------------------------------------------------------- a real Playground env


@pytest.mark.slow  # compiles PPO and a rollout on MuJoCo (MJX) CartpoleBalance
def test_train_ppo_renders_cartpole_videos():
    env = envs.load("CartpoleBalance")
    config = TrainConfig(
        ppo=PPOConfig(n_envs=8, rollout_length=4, total_steps=128, n_epochs=1, n_minibatches=2),
        eval=EvalConfig(enabled=False),
        video=VideoConfig(
            enabled=True,
            every_steps=64,
            episode_length=10,
            render_kwargs={"height": 64, "width": 64},
        ),
    )
    videos: list[VideoData] = []
    train_ppo(env, make_networks(env), config, video_fn=videos.append)
    # Iterations of 32 steps end at 32, 64, 96, 128: multiples of 64 at 64 and 128.
    assert [video.step for video in videos] == [64, 128]
    for video in videos:
        # Balance episodes last 1000 steps: the reset frame and all 10 steps.
        assert video.frames.shape == (11, 64, 64, 3) and video.frames.dtype == np.uint8
        assert video.episode_length == 10
        assert 0 <= video.episode_reward <= 10  # rewards are in [0, 1] per step
        assert all(frame.std() > 0 for frame in video.frames)  # a scene, not a blank
        # The cart moves: the first and last frames differ.
        assert np.any(video.frames[0] != video.frames[-1])
