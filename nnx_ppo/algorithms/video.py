"""Videos of evaluation episodes: recording during training, and MP4 encoding.

``VideoRecorder`` is what ``train_ppo``'s host loop calls on the video schedule: a jitted
single-env deterministic rollout (``eval_rollout_for_render_scan``, compiled once per
training run and reused) followed, on the host, by the env's own ``render``. It returns a
``VideoData`` for ``video_fn``.

``encode_mp4`` writes frames as an MP4 that browsers play (H.264, ``yuv420p``, even frame
size, ``moov`` atom first), with the ffmpeg binary that ``imageio-ffmpeg`` ships.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import uuid
from typing import Any

import imageio_ffmpeg
import jax
import numpy as np
from flax import nnx

from nnx_ppo.algorithms.config import VideoData
from nnx_ppo.algorithms.render_rollout import eval_rollout_for_render_scan, unstack_trajectory
from nnx_ppo.algorithms.types import RLEnv

DEFAULT_RENDER_KWARGS = {"height": 240, "width": 320}
"""Frame size used unless ``VideoConfig.render_kwargs`` says otherwise."""


def check_renderable(env: RLEnv) -> None:
    """Raises ``ValueError`` unless ``env`` has a ``render`` method (MuJoCo Playground envs
    do; the built-in pure-JAX envs do not)."""
    if not callable(getattr(env, "render", None)):
        raise ValueError(
            f"cannot record video: the env {env!r} has no render method (the built-in "
            "pure-JAX envs cannot be rendered). To train with config.video enabled and a "
            "video_fn, pass a MuJoCo Playground env as eval_env, or disable config.video."
        )


class VideoRecorder:
    """Records one deterministic evaluation episode of the current policy as a video.

    Host code: ``recorder(module_state, key, step)`` runs the jitted single-env rollout
    (``eval_rollout_for_render_scan``), unstacks it and renders it with ``env.render``.
    The rollout is jitted over ``(module_state, key)``, so it compiles once per recorder
    and always sees the parameters it is given (``rollout`` is that jitted function).

    Args:
        env: The (unbatched) evaluation env; it must have ``render``.
        graphdef: Graph definition of ``(networks, optimizer)``, as the host loop splits it.
        episode_length: Steps ``T`` of the recorded episode.
        render_kwargs: Keyword arguments for ``env.render``; ``height`` and ``width`` default
            to ``DEFAULT_RENDER_KWARGS``.
    """

    def __init__(
        self,
        env: RLEnv,
        graphdef: Any,
        episode_length: int,
        render_kwargs: dict[str, Any] | None = None,
    ) -> None:
        check_renderable(env)
        self.env = env
        self.episode_length = episode_length
        self.render_kwargs = {**DEFAULT_RENDER_KWARGS, **(render_kwargs or {})}

        def rollout(module_state: Any, key: jax.Array) -> tuple[Any, Any, jax.Array]:
            networks, _ = nnx.merge(graphdef, module_state)
            return eval_rollout_for_render_scan(env, networks, episode_length, key)

        self.rollout = jax.jit(rollout)

    def __call__(self, module_state: Any, key: jax.Array, step: int) -> VideoData:
        """Renders the episode from ``env.reset(key)``; ``step`` goes into the ``VideoData``.

        Returns:
            ``VideoData`` with uint8 frames ``[F, H, W, 3]``: the reset state, then one frame
            per step up to the first done state or ``T`` steps (``F = episode_length + 1``).
        """
        stacked, final, total_reward = self.rollout(module_state, key)
        trajectory = unstack_trajectory(stacked, final, self.episode_length)
        rendered = self.env.render(trajectory, **self.render_kwargs)  # type: ignore[attr-defined]
        frames = np.stack([np.asarray(frame) for frame in rendered]).astype(np.uint8, copy=False)
        return VideoData(
            frames=frames,
            step=int(step),
            episode_reward=float(total_reward),
            episode_length=len(trajectory) - 1,  # the first frame is the reset state
        )


def _frames_of(video: VideoData | np.ndarray) -> np.ndarray:
    frames = np.asarray(video.frames if isinstance(video, VideoData) else video)
    if frames.ndim != 4 or frames.shape[-1] != 3 or min(frames.shape) == 0:
        raise ValueError(f"frames must be a non-empty [T, H, W, 3] array, got {frames.shape}")
    if frames.dtype != np.uint8:
        raise ValueError(f"frames must be uint8, got {frames.dtype}")
    return frames


def _pad_to_even(frames: np.ndarray) -> np.ndarray:
    """Repeats the last row/column where height/width is odd (yuv420p needs even sizes)."""
    _, height, width, _ = frames.shape
    pad = ((0, 0), (0, height % 2), (0, width % 2), (0, 0))
    return np.pad(frames, pad, mode="edge") if height % 2 or width % 2 else frames


def encode_mp4(
    video: VideoData | np.ndarray, path: str | os.PathLike[str], fps: float = 30
) -> pathlib.Path:
    """Writes frames to ``path`` as an H.264 MP4 that browsers play.

    The video is ``yuv420p`` (odd heights/widths are padded by one repeated row/column) with
    the ``moov`` atom before the media data (``faststart``), so it streams. The file is
    written under a temporary name in the same folder and renamed into place: ``path`` is
    either absent, its old contents, or the complete new video.

    Args:
        video: A ``VideoData``, or uint8 frames ``[T, H, W, 3]`` (RGB).
        path: Where to write the ``.mp4``; its folder must exist.
        fps: Frames per second (positive).

    Returns:
        ``path`` as a ``pathlib.Path``.

    Raises:
        ValueError: If the frames are not uint8 ``[T, H, W, 3]`` or ``fps`` is not positive.
        RuntimeError: If ffmpeg fails (its error output is included).
    """
    frames = _pad_to_even(_frames_of(video))
    if isinstance(fps, bool) or not isinstance(fps, int | float) or not fps > 0:
        raise ValueError(f"fps must be a positive number, got {fps!r}")
    path = pathlib.Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    _, height, width, _ = frames.shape
    # fmt: off
    command = [
        imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-loglevel", "error",
        "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{width}x{height}", "-r", f"{fps}",
        "-i", "-",
        "-an", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "18", "-preset", "fast",
        "-movflags", "+faststart", "-f", "mp4", str(tmp),
    ]
    # fmt: on
    try:
        result = subprocess.run(
            command, input=np.ascontiguousarray(frames).tobytes(), capture_output=True
        )
        if result.returncode != 0:
            message = result.stderr.decode(errors="replace").strip()
            code = result.returncode
            raise RuntimeError(f"ffmpeg failed writing {path} (exit {code}): {message}")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
