"""The HTTP side that the client's parts share: requests with the service's errors raised
as the client's (``nnx_ppo.client.errors``), streamed downloads that leave nothing
half-written, and the paths of runs and sweeps."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import httpx

from nnx_ppo.client.errors import (
    NotFound,
    ServiceUnavailable,
    api_error,
)


class HttpBase:
    """What ``Client`` and its parts (``MetricReads``, ``Downloads``) share: the service's
    ``url`` and one ``httpx.Client``."""

    url: str
    _http: httpx.Client

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


def _detail(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip() or response.reason_phrase
    return body.get("detail", body) if isinstance(body, dict) else body
