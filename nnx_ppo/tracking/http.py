"""``ReportClient``: a tracked run's requests to the service's per-run-token report path
(``/api/runs/{id}/report/...``), each retried while it fails transiently (no connection,
a timeout, 5xx, 429: the service restarting) with backoff, for up to ``retry_for_s``.

A batch carries a ``seq``: one retried after an answer that never came is stored once by
the service. A refused token (401, 403: the run was ended on the service, or crashed)
raises ``RunEnded``; a report the service refuses (another 4xx) raises ``ReportRefused``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from nnx_ppo.client.errors import ClientError
from nnx_ppo.client.uploads import file_chunks, upload_headers

BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 5.0)
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


class TrackingError(ClientError):
    """A tracked run's report could not be delivered (the message says why)."""


class RunEnded(TrackingError):
    """The service refused the run token: the run is over there (finished or crashed)."""


class ReportRefused(TrackingError):
    """The service refused a report (a 4xx other than 401/403)."""


def encode_value(value: float) -> float | str:
    """A metric value as the service's JSON takes it (non-finite ones as strings)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


class ReportClient:
    def __init__(
        self,
        url: str,
        run_id: str,
        token: str,
        *,
        retry_for_s: float = 3600.0,
        timeout_s: float = 30.0,
        closing: Callable[[], bool] = lambda: False,
    ):
        self.run_id = run_id
        self.base = f"/api/runs/{run_id}/report"
        self.retry_for_s = retry_for_s
        self._closing = closing
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )

    def close(self) -> None:
        self._http.close()

    def send_batch(self, seq: int, items: list[dict[str, Any]]) -> None:
        self._request("POST", "/batch", json={"seq": seq, "items": items})

    def upload(self, route: str, file: Path) -> None:
        """``file`` PUT at ``route`` (``/checkpoints/{step}``, ``/videos/{name}``) with its
        SHA-256, streamed."""
        headers = upload_headers(file)
        self._request("PUT", route, content=lambda: file_chunks(file), headers=headers)

    def heartbeat(self, timeout_s: float) -> bool | None:
        """One heartbeat (not retried); whether the run was cancelled on the service, None
        when the service did not answer. Raises ``RunEnded`` for a refused token."""
        try:
            response = self._http.post(self.base + "/heartbeat", json={}, timeout=timeout_s)
        except (httpx.TransportError, RuntimeError):  # RuntimeError: the client was closed
            return None
        if response.status_code in (401, 403):
            raise RunEnded(f"run {self.run_id}: the service refused its run token")
        if response.status_code != 200:
            return None
        return bool(response.json().get("cancel_requested"))

    def finish(self, status: str, error: str | None) -> None:
        self._request("POST", "/finish", json={"status": status, "error": error}, finish=True)

    def _request(self, method: str, path: str, *, finish: bool = False, **kwargs: Any) -> None:
        deadline = time.monotonic() + self.retry_for_s
        attempt = 0
        while True:
            content = kwargs.get("content")
            sent = {**kwargs, "content": content()} if callable(content) else kwargs
            try:
                response = self._http.request(method, self.base + path, **sent)
                if response.status_code not in TRANSIENT_STATUSES:
                    self._check(response, path, finish)
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() >= deadline or (attempt > 0 and self._closing()):
                raise TrackingError(
                    f"the service at {self._http.base_url} did not take {path} of run "
                    f"{self.run_id} (retried {attempt + 1} times)"
                )
            time.sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
            attempt += 1

    def _check(self, response: httpx.Response, path: str, finish: bool) -> None:
        if response.status_code in (401, 403) or (finish and response.status_code == 409):
            raise RunEnded(
                f"run {self.run_id}: the service refused {path} ({response.status_code}): "
                f"{_detail(response)}"
            )
        if response.status_code >= 400:
            raise ReportRefused(
                f"run {self.run_id}: the service refused {path} ({response.status_code}): "
                f"{_detail(response)}"
            )


def _detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail"))
    except ValueError:
        return response.text[:200]
