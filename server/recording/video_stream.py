"""An MP4 written frame batch by frame batch (the recording's video is rendered chunk by
chunk): ffmpeg reads raw RGB frames from a pipe, with the settings of
``nnx_ppo.algorithms.video.encode_mp4`` (H.264, ``yuv420p``, even size, ``faststart``)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import IO

import imageio_ffmpeg
import numpy as np


class Mp4Stream:
    """Frames in, one MP4 out; the frame size is the first batch's (odd sizes padded by a
    repeated row/column, as ``encode_mp4`` does)."""

    def __init__(self, path: Path, fps: float) -> None:
        self.path = path
        self.fps = fps
        self.frames = 0
        self._size: tuple[int, int] | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def _start(self, height: int, width: int) -> IO[bytes]:
        # fmt: off
        command = [
            imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-loglevel", "error",
            "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{width}x{height}", "-r", f"{self.fps}",
            "-i", "-",
            "-an", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "18", "-preset", "fast",
            "-movflags", "+faststart", "-f", "mp4", str(self.path),
        ]
        # fmt: on
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
        )
        self._size = (height, width)
        assert self._process.stdin is not None  # PIPE was asked for
        return self._process.stdin

    def write(self, frames: np.ndarray) -> None:
        """Appends uint8 frames ``[F, H, W, 3]``, all of the first batch's size."""
        frames = np.asarray(frames)
        if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
            raise ValueError(
                f"frames must be uint8 [F, H, W, 3], got {frames.dtype} {frames.shape}"
            )
        _, height, width, _ = frames.shape
        pad = ((0, 0), (0, height % 2), (0, width % 2), (0, 0))
        frames = np.pad(frames, pad, mode="edge") if height % 2 or width % 2 else frames
        size = frames.shape[1:3]
        if self._process is None:
            stdin = self._start(*size)
        elif size != self._size:
            raise ValueError(f"frames of {size} after frames of {self._size}")
        else:
            assert self._process.stdin is not None
            stdin = self._process.stdin
        stdin.write(np.ascontiguousarray(frames).tobytes())
        self.frames += len(frames)

    def close(self) -> None:
        """Finishes the file (``RuntimeError`` with ffmpeg's message when it failed)."""
        if self._process is None:
            raise ValueError("no frames were written")
        assert self._process.stdin is not None and self._process.stderr is not None
        self._process.stdin.close()
        with self._process.stderr:
            message = self._process.stderr.read().decode(errors="replace").strip()
        code = self._process.wait()
        if code != 0:
            raise RuntimeError(f"ffmpeg failed writing {self.path} (exit {code}): {message}")

    def abort(self) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        for pipe in (self._process.stdin, self._process.stderr):
            if pipe is not None:
                pipe.close()
