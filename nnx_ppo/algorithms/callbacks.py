"""Ready-made callbacks for ``train_ppo``.

Weights & Biases is optional (``pip install nnx-ppo[wandb]``): it is imported when a
callback is created, not when this module is imported.
"""

from __future__ import annotations

import io
import pathlib
import tempfile
from collections.abc import Callable
from typing import Any

from nnx_ppo.algorithms.config import VideoData
from nnx_ppo.algorithms.video import encode_mp4


def _import_wandb() -> Any:
    try:
        import wandb
    except ImportError as err:
        raise ImportError(
            "wandb_video_fn needs Weights & Biases: install the 'wandb' extra "
            "(pip install 'nnx-ppo[wandb]') or pip install wandb"
        ) from err
    return wandb


def wandb_video_fn(key: str = "eval_video", fps: int = 30) -> Callable[[VideoData], None]:
    """Create a video callback that logs to wandb.

    Each video is encoded here as an H.264 MP4 (``encode_mp4``; wandb's own encoder would
    need moviepy) and logged to the active run as ``wandb.Video`` under ``key`` at the
    video's training step, with its episode reward and length in the caption.

    Args:
        key: The wandb log key for the video.
        fps: Frames per second for the video.

    Returns:
        A callback function compatible with train_ppo's video_fn parameter.

    Raises:
        ImportError: If ``wandb`` is not installed (raised here, before any training).
        RuntimeError: When the callback runs outside a wandb run (call ``wandb.init`` first).

    Example:
        >>> result = train_ppo(
        ...     env, networks,
        ...     video_fn=wandb_video_fn(fps=50),
        ... )
    """
    wandb = _import_wandb()

    def log_video(video: VideoData) -> None:
        if wandb.run is None:
            raise RuntimeError("wandb_video_fn: no active wandb run; call wandb.init() first")
        with tempfile.TemporaryDirectory() as folder:
            path = encode_mp4(video, pathlib.Path(folder) / "video.mp4", fps=fps)
            data = io.BytesIO(path.read_bytes())
        caption = (
            f"step {video.step}: reward {video.episode_reward:.3f}, {video.episode_length} steps"
        )
        wandb.log({key: wandb.Video(data, caption=caption, format="mp4")}, step=video.step)

    return log_video
