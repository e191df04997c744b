"""``Client``: the service's HTTP and websocket API from Python (no JAX, no server code)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from nnx_ppo.client.downloads import Downloads
from nnx_ppo.client.errors import (
    ApiError,
    ServiceUnavailable,
    api_error,
)
from nnx_ppo.client.metric_reads import MetricReads
from nnx_ppo.client.recordings import RecordingMethods
from nnx_ppo.client.types import (
    Env,
    Event,
    Health,
    Run,
    RunList,
    Sweep,
    SweepEvent,
    SweepList,
)

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_DATA_DIR = "nnx_ppo_data"
TOKEN_FILE = "api_token"
"""The file in the data directory where ``nnx-ppo serve`` writes its token (mode 0600)."""
SUBMIT_TIMEOUT_S = 150.0
"""How long a submission may take: the service checks the spec first, and the first check of
a MuJoCo Playground env loads it (the service's checker gives up after 120 s)."""


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


class Client(MetricReads, Downloads, RecordingMethods):
    """A client of one nnx-ppo service (its parts: ``MetricReads``, ``Downloads``,
    ``RecordingMethods``).

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
        return Run.from_json(
            self._json("POST", "/api/runs", "submit", json=dict(spec), timeout=SUBMIT_TIMEOUT_S)
        )

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
        answer = self._json(
            "POST", "/api/sweeps", "submit sweep", json=dict(sweep), timeout=SUBMIT_TIMEOUT_S
        )
        return Sweep.from_json(answer)

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

    # -- the service ----------------------------------------------------------------------

    def envs(self) -> list[Env]:
        data = self._json("GET", "/api/envs", "envs")
        return [Env.from_json(e) for e in data["items"]]

    def health(self) -> Health:
        return Health.from_json(self._json("GET", "/api/health", "health"))


def _ws_detail(error: Any) -> Any:
    body = getattr(error.response, "body", b"") or b""
    try:
        data = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace").strip() or f"HTTP {error.response.status_code}"
    return data.get("detail", data) if isinstance(data, dict) else data
