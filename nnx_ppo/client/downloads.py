"""``Client``'s file reads: a run's checkpoints, policy, videos, TensorBoard export, logs."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from nnx_ppo.client.archive import extract_checkpoint
from nnx_ppo.client.errors import (
    NotFound,
)
from nnx_ppo.client.http import HttpBase
from nnx_ppo.client.types import (
    Checkpoint,
    Run,
    Video,
)


class Downloads(HttpBase):
    """A run's files (a part of ``Client``)."""

    def checkpoints(self, run_id: str) -> list[Checkpoint]:
        path = f"{self._run_path(run_id)}/checkpoints"
        data = self._json("GET", path, f"checkpoints of {run_id}")
        return [Checkpoint.from_json(c) for c in data["items"]]

    def videos(self, run_id: str) -> list[Video]:
        data = self._json("GET", f"{self._run_path(run_id)}/videos", f"videos of {run_id}")
        return [Video.from_json(v) for v in data["items"]]

    def download_checkpoint(
        self, run_id: str, step: int | None = None, dest: str | os.PathLike[str] = "."
    ) -> Path:
        """Downloads a checkpoint (the newest when ``step`` is None) and unpacks it as
        ``dest/step_XXXXXXXXXX/`` (replacing one already there), the folder that
        ``nnx_ppo.algorithms.checkpointing.load_checkpoint`` reads; returns that path.
        The archive is checked before anything is unpacked (no links, no path outside
        its folder)."""
        if step is None:
            found = self.checkpoints(run_id)
            if not found:
                raise NotFound(404, f"run {run_id} has no checkpoint yet", "checkpoint")
            step = found[-1].step
        target_dir = Path(dest)
        target_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target_dir, prefix=".nnx-ppo-download-") as tmp:
            archive = Path(tmp) / "checkpoint.tar.gz"
            path = f"{self._run_path(run_id)}/checkpoints/{int(step)}"
            self._download(path, archive, f"checkpoint {step} of {run_id}")
            unpacked = Path(tmp) / "unpacked"
            name = extract_checkpoint(archive, unpacked)
            target = target_dir / name
            if target.exists():
                os.replace(target, Path(tmp) / "previous")
            os.replace(unpacked / name, target)
        return target

    def download_policy(
        self,
        run_id: str,
        step: int | None = None,
        format: str = "onnx",
        dest: str | os.PathLike[str] = ".",
        timeout: float = 300,
    ) -> Path:
        """Downloads the deterministic policy of a checkpoint (the newest when ``step`` is
        None) as a program that runs without nnx-ppo: ``format`` ``"onnx"`` or
        ``"stablehlo"`` (see ``nnx_ppo.policy.exporting``). Written to the file ``dest``, or
        into the folder ``dest`` as ``{run_id}-step_XXXXXXXXXX.{onnx|stablehlo}``; returns
        its path. The service exports it on the first request (seconds; ``timeout``)."""
        if step is None:
            found = self.checkpoints(run_id)
            if not found:
                raise NotFound(404, f"run {run_id} has no checkpoint yet", "checkpoint")
            step = found[-1].step
        dest_path = Path(dest)
        name = f"{run_id}-step_{int(step):010d}.{format}" if dest_path.is_dir() else ""
        dest_path.parent.mkdir(parents=True, exist_ok=True)
        path = f"{self._run_path(run_id)}/checkpoints/{int(step)}/policy?format={format}"
        what = f"policy of checkpoint {step} of {run_id}"
        return self._download(path, dest_path, what, name, timeout=timeout)

    def download_video(
        self, run_id: str, video_id: int, dest: str | os.PathLike[str] = "."
    ) -> Path:
        """Downloads a video's MP4 into the folder ``dest`` (or to the file ``dest`` when it
        ends in ``.mp4``); returns its path."""
        dest_path = Path(dest)
        path = f"{self._run_path(run_id)}/videos/{int(video_id)}"
        if dest_path.suffix.lower() == ".mp4":
            dest_path.parent.mkdir(parents=True, exist_ok=True)
            return self._download(path, dest_path, f"video {video_id} of {run_id}")
        dest_path.mkdir(parents=True, exist_ok=True)
        return self._download(
            path, dest_path, f"video {video_id} of {run_id}", f"{run_id}-video-{video_id}.mp4"
        )

    def export_tensorboard(self, run_id: str, dest: str | os.PathLike[str] = ".") -> Path:
        """Downloads a TensorBoard event file of the run's scalars into the folder ``dest``
        (``tensorboard --logdir DEST`` shows it); returns its path."""
        run = Run.from_json(self._json("GET", self._run_path(run_id), f"run {run_id}"))
        folder = Path(dest)
        folder.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(run.created_at)}.nnx-ppo.{run.id}"
        path = f"{self._run_path(run.id)}/export?format=tensorboard"
        return self._download(path, folder, f"export of {run_id}", name)

    def logs(self, run_id: str, tail: int | None = None) -> str:
        """The run process's output (its last ``tail`` lines)."""
        params = {} if tail is None else {"tail": tail}
        path = f"{self._run_path(run_id)}/logs"
        return self._request("GET", path, f"logs of {run_id}", params=params).text
