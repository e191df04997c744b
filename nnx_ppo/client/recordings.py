"""The client's activation recordings (``Client`` has these methods): request one of a
run's checkpoint, list and read them, wait for one, cancel it, and load its arrays."""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from nnx_ppo.client.http import HttpBase

RECORDING_TERMINAL = ("succeeded", "failed", "cancelled")


@dataclasses.dataclass(frozen=True)
class Recording:
    """A recording of a run's checkpoint (``manifest``: once it succeeded, read with
    ``Client.recording``; the list leaves it out)."""

    id: int
    run_id: str
    status: str
    step: int
    n_envs: int
    episode_length: int
    seed: int
    video: bool
    estimated_bytes: int
    bytes: int | None
    error: str | None
    cancel_requested: bool
    created_at: float
    started_at: float | None
    finished_at: float | None
    url: str
    data_url: str | None
    video_url: str | None
    manifest: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Recording:
        return cls(
            id=int(data["id"]),
            run_id=str(data["run_id"]),
            status=str(data["status"]),
            step=int(data["step"]),
            n_envs=int(data["n_envs"]),
            episode_length=int(data["episode_length"]),
            seed=int(data["seed"]),
            video=bool(data["video"]),
            estimated_bytes=int(data["estimated_bytes"]),
            bytes=None if data.get("bytes") is None else int(data["bytes"]),
            error=data.get("error"),
            cancel_requested=bool(data.get("cancel_requested", False)),
            created_at=float(data["created_at"]),
            started_at=_float_or_none(data.get("started_at")),
            finished_at=_float_or_none(data.get("finished_at")),
            url=str(data.get("url", "")),
            data_url=data.get("data_url"),
            video_url=data.get("video_url"),
            manifest=data.get("manifest"),
        )

    @property
    def finished(self) -> bool:
        return self.status in RECORDING_TERMINAL


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


class RecordingMethods(HttpBase):
    """A run's activation recordings (a part of ``Client``)."""

    def recordings(self, run_id: str) -> list[Recording]:
        """The run's recordings, oldest first."""
        path = f"{self._run_path(run_id)}/recordings"
        data = self._json("GET", path, f"recordings of {run_id}")
        return [Recording.from_json(r) for r in data["items"]]

    def recording(self, run_id: str, recording_id: int) -> Recording:
        """One recording, with its manifest once it succeeded."""
        path = f"{self._run_path(run_id)}/recordings/{int(recording_id)}"
        return Recording.from_json(self._json("GET", path, f"recording {recording_id}"))

    def record(
        self,
        run_id: str,
        *,
        n_envs: int,
        episode_length: int,
        step: int | None = None,
        seed: int = 0,
        video: bool = False,
        wait: bool = False,
        timeout: float = 3600,
    ) -> Recording:
        """Queues a recording of the run's checkpoint at ``step`` (None: the newest):
        ``n_envs`` envs for ``episode_length`` steps; ``video``: env 0 rendered too. With
        ``wait``, returns once it has ended (``TimeoutError`` after ``timeout`` s)."""
        body = {
            "step": step,
            "n_envs": n_envs,
            "episode_length": episode_length,
            "seed": seed,
            "video": video,
        }
        path = f"{self._run_path(run_id)}/recordings"
        recording = Recording.from_json(self._json("POST", path, "recording", json=body))
        return self.wait_recording(run_id, recording.id, timeout) if wait else recording

    def wait_recording(self, run_id: str, recording_id: int, timeout: float = 3600) -> Recording:
        """The recording once it has ended (``TimeoutError`` after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while True:
            recording = self.recording(run_id, recording_id)
            if recording.finished:
                return recording
            if time.monotonic() > deadline:
                raise TimeoutError(f"recording {recording_id} is still {recording.status}")
            time.sleep(0.5)

    def cancel_recording(self, run_id: str, recording_id: int) -> Recording:
        path = f"{self._run_path(run_id)}/recordings/{int(recording_id)}/cancel"
        return Recording.from_json(self._json("POST", path, f"recording {recording_id}"))

    def download_recording(
        self, run_id: str, recording_id: int, dest: str | os.PathLike[str] = "."
    ) -> Path:
        """Downloads a recording's ``.npz`` into the folder ``dest`` (or to the file
        ``dest`` when it ends in ``.npz``); returns its path."""
        dest_path = Path(dest)
        path = f"{self._run_path(run_id)}/recordings/{int(recording_id)}/data"
        what = f"recording {recording_id} of {run_id}"
        if dest_path.suffix.lower() == ".npz":
            dest_path.parent.mkdir(parents=True, exist_ok=True)
            return self._download(path, dest_path, what)
        dest_path.mkdir(parents=True, exist_ok=True)
        return self._download(path, dest_path, what, f"{run_id}-recording-{recording_id}.npz")

    def load_recording(self, run_id: str, recording_id: int) -> dict[str, np.ndarray]:
        """A recording's arrays (``[T, N, ...]``, by population or module path, and
        ``dones``, ``obs``, ``actions``, ``rewards``), read into memory."""
        with tempfile.TemporaryDirectory(prefix="nnx-ppo-recording-") as tmp:
            path = self.download_recording(run_id, recording_id, Path(tmp) / "recording.npz")
            with np.load(path, allow_pickle=False) as data:
                return {name: np.asarray(data[name]) for name in data.files}


__all__ = ["RECORDING_TERMINAL", "Recording", "RecordingMethods"]
