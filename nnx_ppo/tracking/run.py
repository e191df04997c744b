"""``track``: a run on the nnx-ppo service for training that happens elsewhere (a script, a
notebook), watched live in the dashboard like a queued run.

    with nnx_ppo.track(name="my-run", config=spec) as run:
        train_ppo(env, networks, config, **run.callbacks)

The callbacks report through ``Transport`` (a bounded buffer and a background sender: the
training loop never waits on the network) or, with ``mode="offline"``, to a directory that
``nnx-ppo sync DIR`` uploads later. When ``config`` is a run spec (``kind``, ``env``,
``network``, ``config``, as ``POST /api/runs`` takes), the run's checkpoints can be resumed
or forked as queued runs on the service.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
import time
import uuid
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol

import numpy as np

from nnx_ppo.client.client import default_token, default_url
from nnx_ppo.tracking.http import ReportClient, TrackingError, encode_value
from nnx_ppo.tracking.offline import OfflineWriter
from nnx_ppo.tracking.service import create_tracked_run
from nnx_ppo.tracking.transport import Entry, Transport, Upload

Mode = Literal["online", "offline"]
Outcome = Literal["succeeded", "failed", "cancelled"]
OFFLINE_DIR = "nnx_ppo_offline"
"""Where offline runs are written (each in its own folder) unless told otherwise."""


class Sink(Protocol):
    """Where a tracked run's reports go: ``Transport`` (online) or ``OfflineWriter``."""

    dropped: int
    cancel_requested: bool
    ended: TrackingError | None

    def put(self, entry: Entry) -> bool: ...
    def pending(self) -> int: ...
    def flush(self, timeout_s: float) -> bool: ...
    def close(self, timeout_s: float) -> int: ...


class TrackedRun:
    """A run tracked on the service (see the module doc). Its callbacks go to
    ``train_ppo`` / ``train_distillation`` (``callbacks`` as a dict for ``**``).

    Attributes:
        id: The run's id on the service (None offline: ``nnx-ppo sync`` gives it one).
        directory: The offline run's folder (None online).
    """

    def __init__(
        self,
        run_id: str | None,
        sink: Sink,
        *,
        finish_client: ReportClient | None = None,
        directory: Path | None = None,
    ):
        self.id = run_id
        self.directory = directory
        self._sink = sink
        self._finish_client = finish_client
        self._scratch = Path(tempfile.mkdtemp(prefix="nnx-ppo-track-"))
        self.status: str | None = None
        """The outcome once finished."""

    def __repr__(self) -> str:
        where = f"id={self.id!r}" if self.id else f"directory={str(self.directory)!r}"
        return f"TrackedRun({where}, status={self.status or 'running'!r})"

    # -- the callbacks ------------------------------------------------------------------

    @property
    def callbacks(self) -> dict[str, Any]:
        """``log_fn``, ``video_fn``, ``checkpoint_fn`` and ``should_stop`` (true once the
        run is cancelled in the dashboard), for ``train_ppo(..., **run.callbacks)``."""
        return {
            "log_fn": self.log_fn,
            "video_fn": self.video_fn,
            "checkpoint_fn": self.checkpoint_fn,
            "should_stop": self.should_stop,
        }

    def log_fn(self, metrics: Mapping[str, Any], step: int) -> None:
        """One iteration's metrics (scalars; others are left out) at env step ``step``."""
        values: dict[str, float | str] = {}
        for key, value in metrics.items():
            try:
                values[str(key)] = encode_value(float(value))
            except (TypeError, ValueError):
                continue
        item = {"type": "metrics", "step": int(step), "wall_time": time.time(), "values": values}
        self._sink.put(item)

    def log(self, line: str) -> None:
        """A line for the run's log in the dashboard (live in its stream; the whole log is
        uploaded as the run's log file when it finishes)."""
        self._sink.put({"type": "log", "line": str(line)})
        self._log_file(str(line))

    def _log_file(self, line: str) -> None:
        with open(self._scratch / "run.log", "a", encoding="utf-8") as out:
            out.write(f"{line}\n")

    def video_fn(self, video: Any) -> None:
        """A rendered episode (``VideoData``), encoded as MP4 and uploaded."""
        from nnx_ppo.algorithms.video import encode_mp4

        name = f"step_{int(video.step):010d}.mp4"
        path = encode_mp4(video, self._scratch / f"{uuid.uuid4().hex}.mp4")
        announce = {
            "type": "video",
            "step": int(video.step),
            "filename": name,
            "episode_reward": encode_value(float(video.episode_reward)),
            "episode_length": int(video.episode_length),
        }
        self._sink.put(Upload(f"/videos/{name}", path, announce))

    def checkpoint_fn(self, state: Any, step: int) -> None:
        """A checkpoint of ``state`` (``TrainingState`` or ``DistillationState``) in the
        service's layout, uploaded (so it can be downloaded, or resumed as a queued run)."""
        from nnx_ppo.algorithms.checkpointing import save_checkpoint
        from nnx_ppo.algorithms.distillation import as_training_state
        from nnx_ppo.algorithms.types import DistillationState

        directory = self._scratch / "checkpoints"
        if isinstance(state, DistillationState):
            state = as_training_state(state)
        folder = Path(save_checkpoint(str(directory), state, int(step)))
        size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        archive = self._scratch / f"{folder.name}-{uuid.uuid4().hex[:8]}.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(folder, arcname=folder.name)
        shutil.rmtree(folder, ignore_errors=True)
        announce = {
            "type": "checkpoint",
            "step": int(step),
            "size_bytes": size,
            "created_at": time.time(),
            "url": f"/api/runs/{self.id}/checkpoints/{int(step)}",
        }
        self._sink.put(Upload(f"/checkpoints/{int(step)}", archive, announce))

    def upload_recording(
        self,
        activations: Mapping[str, Any],
        dones: Any,
        *,
        step: int,
        seed: int = 0,
        env: str | None = None,
        env_overrides: Mapping[str, Any] | None = None,
        obs: Any = None,
        actions: Any = None,
        rewards: Any = None,
    ) -> None:
        """A recording of the network's units made here, uploaded as one of the run's
        recordings (its Recordings tab, ``GET .../recordings``, the same ``.npz`` download).

        ``activations, dones`` are what ``record_activations_rollout`` returns: ``[T, N,
        units]`` per population or module path, and the ``[T, N]`` pre-step mask. ``obs``,
        ``actions``, ``rewards`` (arrays or dicts of arrays) are those of the same steps.

        Args:
            step: The checkpoint step whose network was recorded.
            seed: The seed of the env resets.
            env: The env's name (the dashboard shows it).
            env_overrides: Its overrides.

        Raises:
            ValueError: Arrays whose first two axes are not ``dones``' ``[T, N]``, a
                ``dones`` that is not ``[T, N]``, no activations.
        """
        arrays = {f"activations/{key}": np.asarray(value) for key, value in activations.items()}
        arrays["dones"] = np.asarray(dones, dtype=bool)
        for kind, value in (("obs", obs), ("actions", actions), ("rewards", rewards)):
            if isinstance(value, Mapping):
                arrays.update({f"{kind}/{k}": np.asarray(v) for k, v in value.items()})
            elif value is not None:
                arrays[kind] = np.asarray(value)
        shape = arrays["dones"].shape
        if len(shape) != 2 or not activations:
            raise ValueError(f"a recording needs activations and dones [T, N], got dones {shape}")
        wrong = {k: a.shape for k, a in arrays.items() if a.shape[:2] != shape}
        if wrong:
            raise ValueError(f"arrays whose first axes are not dones' {shape}: {wrong}")
        name = uuid.uuid4().hex
        path = self._scratch / f"{name}.npz"
        meta = {
            "step": int(step),
            "seed": int(seed),
            "env": {"name": env or "", "overrides": dict(env_overrides or {})},
        }
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            for key, array in arrays.items():
                with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, array, allow_pickle=False)
            archive.writestr("meta.json", json.dumps(meta))
        line = (
            f"recording uploaded: checkpoint step {int(step)}, {shape[0]} steps x {shape[1]} "
            f"envs, {len(activations)} populations"
        )
        self._sink.put(Upload(f"/recordings/{name}", path, {"type": "log", "line": line}))
        self._log_file(line)

    def should_stop(self) -> bool:
        """Whether the run was cancelled in the dashboard (as of the last heartbeat)."""
        return self._sink.cancel_requested

    @property
    def dropped(self) -> int:
        """Reports that did not fit the buffer (also reported to the run itself)."""
        return self._sink.dropped

    # -- the end ------------------------------------------------------------------------

    def finish(
        self, status: Outcome | None = None, error: str | None = None, timeout_s: float = 120.0
    ) -> None:
        """Delivers what is buffered (waiting up to ``timeout_s``) and ends the run:
        ``status`` (default ``cancelled`` if cancelled in the dashboard, else
        ``succeeded``). A second call does nothing. Reports that could not be delivered
        are counted in a warning, never silently lost."""
        if self.status is not None:
            return
        outcome: Outcome = status or ("cancelled" if self.should_stop() else "succeeded")
        self.status = outcome
        undelivered = self._sink.close(timeout_s)
        try:
            if isinstance(self._sink, OfflineWriter):
                self._sink.finish(outcome, error)
            elif self._finish_client is not None:
                self._finish_client.retry_for_s = timeout_s
                self._finish(outcome, error)
        finally:
            shutil.rmtree(self._scratch, ignore_errors=True)
        if undelivered:
            warnings.warn(
                f"run {self.id}: {undelivered} report(s) were not delivered to the service "
                f"({self._sink.ended or 'buffer full, or the service did not answer in time'})",
                RuntimeWarning,
                stacklevel=2,
            )

    def _finish(self, outcome: Outcome, error: str | None) -> None:
        assert self._finish_client is not None
        log = self._scratch / "run.log"
        try:
            if log.exists() and self._sink.ended is None:
                self._finish_client.upload("/log", log)
            self._finish_client.finish(outcome, error)
        except TrackingError as failure:
            warnings.warn(
                f"run {self.id}: could not end it {outcome} on the service: {failure}",
                RuntimeWarning,
                stacklevel=3,
            )
        finally:
            self._finish_client.close()

    def __enter__(self) -> TrackedRun:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.finish("failed", f"{exc_type.__name__}: {exc}")


def track(
    name: str,
    url: str | None = None,
    token: str | None = None,
    config: Mapping[str, Any] | None = None,
    tags: Sequence[str] = (),
    mode: Mode = "online",
    *,
    notes: str = "",
    total_steps: int = 0,
    directory: str | os.PathLike[str] | None = None,
    buffer_size: int = 10_000,
    put_timeout_s: float = 0.05,
    heartbeat_s: float = 5.0,
) -> TrackedRun:
    """A run on the service for training done here (see the module doc).

    Args:
        name: The run's name in the dashboard.
        url: The service (default ``NNX_PPO_URL``, else ``http://127.0.0.1:8000``).
        token: Its access token (found as ``nnx_ppo.client.Client`` finds it).
        config: A JSON object stored as the run's spec; a run spec (kind, env, network,
            config) makes its checkpoints resumable on the service.
        tags: The run's tags.
        mode: ``online`` (reports go to the service as training runs) or ``offline``
            (to a folder of ``directory``; ``nnx-ppo sync FOLDER`` uploads it later).
        notes: The run's notes.
        total_steps: Its planned env steps (0: the config's ``total_steps``).
        directory: Offline only: where the run's folder is made (default
            ``NNX_PPO_OFFLINE_DIR``, else ``./nnx_ppo_offline``).
        buffer_size: How many reports wait for the sender at most.
        put_timeout_s: How long a callback waits for room in a full buffer before it drops
            the report (and counts it).
        heartbeat_s: How often the service is told the script is alive.

    Raises:
        ValueError: A bad ``mode``, a ``config`` that is not a JSON object, bad sizes.
        nnx_ppo.client.ServiceUnavailable: Online, and the service cannot be reached.
        nnx_ppo.client.ApiError: The service refused (401: the token; 422: a field).
    """
    if mode not in ("online", "offline"):
        raise ValueError(f"mode must be 'online' or 'offline', got {mode!r}")
    if buffer_size < 1 or put_timeout_s < 0 or heartbeat_s <= 0:
        raise ValueError(
            f"buffer_size ({buffer_size}) must be >= 1, put_timeout_s ({put_timeout_s}) >= 0 "
            f"and heartbeat_s ({heartbeat_s}) > 0"
        )
    spec = _json_object(config)
    meta: dict[str, Any] = {
        "name": name,
        "config": spec,
        "tags": list(tags),
        "notes": notes,
        "total_steps": int(total_steps),
    }
    if mode == "offline":
        root = Path(directory or os.environ.get("NNX_PPO_OFFLINE_DIR") or OFFLINE_DIR)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        folder = root / f"{stamp}-{uuid.uuid4().hex[:8]}"
        return TrackedRun(None, OfflineWriter(folder, meta), directory=folder)
    url = url or default_url()
    token = token or default_token()
    run_id, run_token = create_tracked_run(url, token, **meta)
    transport = Transport(
        ReportClient(url, run_id, run_token),
        capacity=buffer_size,
        put_timeout_s=put_timeout_s,
        heartbeat_s=heartbeat_s,
    )
    return TrackedRun(run_id, transport, finish_client=ReportClient(url, run_id, run_token))


def _json_object(config: Mapping[str, Any] | None) -> dict[str, Any]:
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a JSON object (a dict), got {type(config).__name__}")
    try:
        return dict(json.loads(json.dumps(dict(config), allow_nan=False)))
    except (TypeError, ValueError) as error:
        raise ValueError(f"config must be JSON (no NaN, no objects): {error}") from None
