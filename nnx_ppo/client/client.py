"""``Client``: the service's HTTP and websocket API from Python (no JAX, no server code)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from nnx_ppo.client.archive import extract_checkpoint
from nnx_ppo.client.errors import (
    ApiError,
    NotFound,
    ServiceUnavailable,
    api_error,
)
from nnx_ppo.client.recordings import RecordingMethods
from nnx_ppo.client.types import (
    Checkpoint,
    Env,
    Event,
    Health,
    Run,
    RunList,
    Series,
    Sweep,
    SweepEvent,
    SweepList,
    Video,
    decode_value,
)

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_DATA_DIR = "nnx_ppo_data"
TOKEN_FILE = "api_token"
"""The file in the data directory where ``nnx-ppo serve`` writes its token (mode 0600)."""


def default_url() -> str:
    return os.environ.get("NNX_PPO_URL") or DEFAULT_URL


def default_token(data_dir: str | os.PathLike[str] | None = None) -> str | None:
    """``NNX_PPO_API_TOKEN``, else the token file of the local service's data directory
    (``data_dir``, else ``NNX_PPO_DATA_DIR``, else ``./nnx_ppo_data``), else None."""
    token = os.environ.get("NNX_PPO_API_TOKEN")
    if token:
        return token
    directory = Path(data_dir or os.environ.get("NNX_PPO_DATA_DIR") or DEFAULT_DATA_DIR)
    try:
        return (directory.expanduser() / TOKEN_FILE).read_text().strip() or None
    except OSError:
        return None


class Client(RecordingMethods):
    """A client of one nnx-ppo service (its recording methods: ``RecordingMethods``).

    Args:
        url: The service, e.g. ``http://127.0.0.1:8000`` (default ``NNX_PPO_URL``, else
            that).
        token: Its access token (default ``NNX_PPO_API_TOKEN``, else the token file that
            ``nnx-ppo serve`` writes to ``<data dir>/api_token``; the data dir is
            ``NNX_PPO_DATA_DIR`` or ``./nnx_ppo_data``).
        timeout: Seconds to wait for each HTTP answer.

    Raises (from every method):
        ServiceUnavailable: the service cannot be reached.
        NotFound, Unauthorized, ApiError: the service answered 404, 401, another error
            (``.status_code``, ``.detail``: for a 422 the field errors).
    """

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30):
        self.url = (url or default_url()).rstrip("/")
        self.token = token or default_token()
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self._http = httpx.Client(base_url=self.url, timeout=timeout, headers=headers)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    # -- runs ---------------------------------------------------------------------------

    def submit(self, spec: Mapping[str, Any]) -> Run:
        """Queues a run (a run spec, see DESIGN.md); a bad spec is an ``ApiError`` 422
        whose ``field_errors`` name the fields."""
        return Run.from_json(self._json("POST", "/api/runs", "submit", json=dict(spec)))

    def runs(
        self,
        status: str | None = None,
        kind: str | None = None,
        tag: str | None = None,
        q: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> RunList:
        """Runs, newest first (``limit`` at most 200)."""
        params = {"status": status, "kind": kind, "tag": tag, "q": q}
        query = {k: v for k, v in params.items() if v is not None}
        data = self._json(
            "GET", "/api/runs", "list runs", params={**query, "limit": limit, "offset": offset}
        )
        return RunList(
            [Run.from_json(r) for r in data["items"]],
            int(data["total"]),
            int(data.get("events_seq") or 0),
        )

    def run(self, run_id: str) -> Run:
        return Run.from_json(self._json("GET", self._run_path(run_id), f"run {run_id}"))

    def update(
        self,
        run_id: str,
        *,
        name: str | None = None,
        tags: list[str] | None = None,
        notes: str | None = None,
    ) -> Run:
        """Edits a run's name, tags or notes (what is None stays)."""
        body = {
            k: v for k, v in {"name": name, "tags": tags, "notes": notes}.items() if v is not None
        }
        return Run.from_json(
            self._json("PATCH", self._run_path(run_id), f"run {run_id}", json=body)
        )

    def cancel(self, run_id: str) -> Run:
        """Asks a run to stop (a running one stops after a final checkpoint)."""
        path = f"{self._run_path(run_id)}/cancel"
        return Run.from_json(self._json("POST", path, f"cancel {run_id}"))

    def delete(self, run_id: str) -> None:
        """Deletes a finished run and its files (an ``ApiError`` 409 for a live one)."""
        self._request("DELETE", self._run_path(run_id), f"delete {run_id}")

    def wait(self, run_id: str) -> Run:
        """Blocks until the run has finished; returns it."""
        for _event in self.follow(run_id, after_seq=self.run(run_id).last_seq):
            pass
        return self.run(run_id)

    # -- the stream -----------------------------------------------------------------------

    def follow(self, run_id: str, after_seq: int = 0, *, retry_for: float = 60) -> Iterator[Event]:
        """The run's events after ``after_seq`` in order, then live ones, until its terminal
        status event (or at once for a finished run whose events were all seen).

        A dropped connection is reopened from the last seq seen, for up to ``retry_for``
        seconds of failing to connect (then ``ServiceUnavailable``).
        """
        for data in self._follow(
            self._run_path(run_id), after_seq, retry_for, f"run {run_id}", lambda: self.run(run_id)
        ):
            event = Event.from_json(data)
            yield event
            if event.terminal:
                return

    def _follow(
        self, path: str, after_seq: int, retry_for: float, what: str, exists: Any
    ) -> Iterator[dict[str, Any]]:
        """The events of the websocket ``path/stream`` after ``after_seq``, reconnecting
        from the last seq seen, until the server closes it normally; ``exists()`` raises
        ``NotFound`` when the resource is unknown (the server refuses its socket)."""
        from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
        from websockets.sync.client import connect

        seq = after_seq
        failing_since: float | None = None
        delay = 0.25
        base = "ws" + self.url[len("http") :] if self.url.startswith("http") else self.url
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        while True:
            url = f"{base}{path}/stream?after_seq={seq}"
            try:
                with connect(
                    url,
                    additional_headers=headers,
                    open_timeout=30,
                    close_timeout=5,
                    max_size=2**24,
                ) as ws:
                    failing_since, delay = None, 0.25
                    try:
                        for message in ws:
                            data = json.loads(message)
                            if int(data["seq"]) <= seq:
                                continue
                            seq = int(data["seq"])
                            yield data
                    except ConnectionClosed:
                        pass  # reconnect below
                    code, reason = ws.close_code, ws.close_reason
                if code == 1000:
                    return  # the server has sent everything there will ever be
                if code == 1008:
                    raise ApiError(400, reason or "the stream refused the request", what)
            except InvalidStatus as error:
                status = error.response.status_code
                if status == 403:
                    exists()  # NotFound for an unknown resource
                if status < 500:
                    raise api_error(status, _ws_detail(error), f"stream of {what}") from None
            except (OSError, TimeoutError, InvalidHandshake):
                pass
            now = time.monotonic()
            failing_since = now if failing_since is None else failing_since
            if now - failing_since > retry_for:
                raise ServiceUnavailable(
                    f"lost the stream of {what} at {self.url} and could not reconnect "
                    f"within {retry_for:.0f} s"
                )
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    # -- sweeps ---------------------------------------------------------------------------

    def submit_sweep(self, sweep: Mapping[str, Any]) -> Sweep:
        """Starts a sweep (``{"spec", "space", "method", "max_trials", "parallel",
        "objective", "pruner", ...}``, see the README); an invalid one is an ``ApiError``
        422 whose ``field_errors`` name the field or the space's path."""
        return Sweep.from_json(self._json("POST", "/api/sweeps", "submit sweep", json=dict(sweep)))

    def sweeps(self, status: str | None = None, limit: int = 50, offset: int = 0) -> SweepList:
        """Sweeps, newest first."""
        query: dict[str, Any] = {"limit": limit, "offset": offset}
        if status is not None:
            query["status"] = status
        data = self._json("GET", "/api/sweeps", "list sweeps", params=query)
        return SweepList([Sweep.from_json(s) for s in data["items"]], int(data["total"]))

    def sweep(self, sweep_id: str) -> Sweep:
        """A sweep with its trials and its best trial."""
        return Sweep.from_json(self._json("GET", self._sweep_path(sweep_id), f"sweep {sweep_id}"))

    def cancel_sweep(self, sweep_id: str) -> Sweep:
        """Queues no more trials and cancels the active ones."""
        path = f"{self._sweep_path(sweep_id)}/cancel"
        return Sweep.from_json(self._json("POST", path, f"cancel sweep {sweep_id}"))

    def delete_sweep(self, sweep_id: str) -> None:
        """Deletes a finished sweep and its trials' runs (an ``ApiError`` 409 otherwise)."""
        self._request("DELETE", self._sweep_path(sweep_id), f"delete sweep {sweep_id}")

    def follow_sweep(
        self, sweep_id: str, after_seq: int = 0, *, retry_for: float = 60
    ) -> Iterator[SweepEvent]:
        """The sweep's events after ``after_seq`` (status, trial, best), then live ones,
        until its final status; reconnects like ``follow``."""
        path = self._sweep_path(sweep_id)
        for data in self._follow(
            path, after_seq, retry_for, f"sweep {sweep_id}", lambda: self.sweep(sweep_id)
        ):
            event = SweepEvent.from_json(data)
            yield event
            if event.terminal:
                return

    # -- metrics --------------------------------------------------------------------------

    def metrics(
        self,
        run_id: str,
        keys: Iterable[str] | str | None = None,
        max_points: int | None = None,
    ) -> dict[str, Series]:
        """A run's metrics as numpy arrays, one ``Series`` per key (all keys by default).

        ``max_points=None``: every stored point with its wall time (from ``metrics.csv``);
        a number: at most that many points per key, downsampled by the server (per bucket
        the last value and the bucket's min and max). NaN and infinities are floats.
        """
        wanted = [keys] if isinstance(keys, str) else None if keys is None else list(keys)
        if max_points is None:
            return self._all_metrics(run_id, wanted)
        params: dict[str, Any] = {"max_points": max_points}
        if wanted is not None:
            params["keys"] = ",".join(wanted)
        path = f"{self._run_path(run_id)}/metrics"
        data = self._json("GET", path, f"metrics of {run_id}", params=params)
        out = {}
        for key, raw in data["series"].items():
            wall = raw.get("wall_time")
            out[key] = Series(
                step=np.asarray(raw["step"], dtype=np.int64),
                value=_floats(raw["value"]),
                min=_floats(raw["min"]),
                max=_floats(raw["max"]),
                wall_time=None if wall is None else np.asarray(wall, dtype=np.float64),
            )
        return out

    def metrics_frame(
        self,
        run_id: str,
        keys: Iterable[str] | str | None = None,
        max_points: int | None = None,
    ) -> Any:
        """``metrics(...)`` as a long-format pandas DataFrame: columns ``key``, ``step``,
        ``value``, ``min``, ``max``, ``wall_time`` (``df.pivot(index="step",
        columns="key", values="value")`` makes it wide). Needs pandas."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError(
                "Client.metrics_frame needs pandas (pip install pandas); "
                "Client.metrics returns the same data as numpy arrays"
            ) from None
        frames = []
        for key, s in self.metrics(run_id, keys, max_points).items():
            wall = s.wall_time if s.wall_time is not None else np.full(len(s), np.nan)
            frames.append(
                pd.DataFrame(
                    {
                        "key": key,
                        "step": s.step,
                        "value": s.value,
                        "min": s.min,
                        "max": s.max,
                        "wall_time": wall,
                    }
                )
            )
        columns = ["key", "step", "value", "min", "max", "wall_time"]
        if not frames:
            return pd.DataFrame({c: [] for c in columns})
        return pd.concat(frames, ignore_index=True)[columns]

    def _all_metrics(self, run_id: str, keys: list[str] | None) -> dict[str, Series]:
        text = self._request("GET", f"{self._run_path(run_id)}/metrics.csv", f"metrics of {run_id}")
        columns: dict[str, tuple[list[int], list[float], list[float]]] = {}
        wanted = None if keys is None else set(keys)
        for row in csv.DictReader(io.StringIO(text.text)):
            key = row["key"]
            if wanted is not None and key not in wanted:
                continue
            steps, walls, vals = columns.setdefault(key, ([], [], []))
            steps.append(int(row["step"]))
            walls.append(float(row["wall_time"]))
            vals.append(decode_value(row["value"]))
        out = {}
        for key, (steps, walls, vals) in columns.items():
            value = np.asarray(vals, dtype=np.float64)
            out[key] = Series(
                step=np.asarray(steps, dtype=np.int64),
                value=value,
                min=value.copy(),
                max=value.copy(),
                wall_time=np.asarray(walls, dtype=np.float64),
            )
        return out

    # -- files ----------------------------------------------------------------------------

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
        run = self.run(run_id)
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

    # -- the service ----------------------------------------------------------------------

    def envs(self) -> list[Env]:
        data = self._json("GET", "/api/envs", "envs")
        return [Env.from_json(e) for e in data["items"]]

    def health(self) -> Health:
        return Health.from_json(self._json("GET", "/api/health", "health"))

    # -- HTTP -----------------------------------------------------------------------------

    @staticmethod
    def _sweep_path(sweep_id: str) -> str:
        if not re.fullmatch(r"[0-9A-Za-z_-]{1,64}", str(sweep_id)):
            raise NotFound(404, f"sweep {sweep_id!r} not found")
        return f"/api/sweeps/{sweep_id}"

    @staticmethod
    def _run_path(run_id: str) -> str:
        if not re.fullmatch(r"[0-9A-Za-z_-]{1,64}", str(run_id)):
            raise NotFound(404, f"run {run_id!r} not found")
        return f"/api/runs/{run_id}"

    def _json(self, method: str, path: str, what: str, **kwargs: Any) -> Any:
        return self._request(method, path, what, **kwargs).json()

    def _request(self, method: str, path: str, what: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as error:
            raise self._unreachable(error) from None
        if response.status_code >= 400:
            raise api_error(response.status_code, _detail(response), what)
        return response

    def _download(
        self,
        path: str,
        dest: Path,
        what: str,
        default_name: str = "",
        timeout: float | None = None,
    ) -> Path:
        """Streams ``path`` to the file ``dest`` (or into the folder ``dest`` under
        ``default_name``) through a temporary file: nothing half-written is left.
        ``timeout``: this request's, if not the client's."""
        options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        try:
            with self._http.stream("GET", path, **options) as response:
                if response.status_code >= 400:
                    response.read()
                    raise api_error(response.status_code, _detail(response), what)
                target = dest / default_name if default_name else dest
                fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=".part")
                try:
                    with os.fdopen(fd, "wb") as out:
                        for chunk in response.iter_bytes(1 << 20):
                            out.write(chunk)
                    os.replace(tmp, target)
                except BaseException:
                    Path(tmp).unlink(missing_ok=True)
                    raise
        except httpx.TransportError as error:
            raise self._unreachable(error) from None
        return target

    def _unreachable(self, error: httpx.TransportError) -> ServiceUnavailable:
        reason = re.sub(r"^\[Errno -?\d+\]\s*", "", str(error)) or type(error).__name__
        if isinstance(error, httpx.TimeoutException):
            reason = "timed out"
        return ServiceUnavailable(
            f"cannot reach the nnx-ppo service at {self.url} ({reason}); is `nnx-ppo serve` "
            "running? (set the URL with --url or NNX_PPO_URL)"
        )


def _floats(values: list[Any]) -> np.ndarray:
    return np.asarray([decode_value(v) for v in values], dtype=np.float64)


def _detail(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip() or response.reason_phrase
    return body.get("detail", body) if isinstance(body, dict) else body


def _ws_detail(error: Any) -> Any:
    body = getattr(error.response, "body", b"") or b""
    try:
        data = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace").strip() or f"HTTP {error.response.status_code}"
    return data.get("detail", data) if isinstance(data, dict) else data
