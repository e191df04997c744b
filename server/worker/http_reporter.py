"""``Reporter`` over HTTP, for a run process on another node: no shared disk, no database.

It speaks to ``/api/runs/{id}/report/...`` (``server.api.report``) with its run token.
Reports queue and go in order from one background thread, as batches (``POST .../batch``)
that carry a seq: a batch retried after a timeout, a dropped connection or an API restart
is stored once. Checkpoints and videos are uploaded (streamed, with their SHA-256) before
the batch that announces them. A heartbeat thread keeps the run alive in the API's eyes
and brings back whether it was cancelled. Transient failures (connection errors, 5xx, 429)
are retried with backoff for up to ``retry_for_s``; a refused token (the run was ended or
handed to another attempt) stops the run.
"""

from __future__ import annotations

import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from nnx_ppo.client.uploads import CHUNK, file_chunks, upload_headers
from server.store import artifacts
from server.store.run_events import ReportItem
from server.worker.reporter import QueuedReporter, ReportFailed, checkpoint_public

RETRY_FOR_S = 600.0
"""How long a report is retried before the run fails (covers an API restart)."""
BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 5.0)
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RemoteAccess:
    """What a run process on another node needs to report: the API's URL, its run token
    and the node's name (shown on the run)."""

    api_url: str
    token: str
    node: str | None = None
    heartbeat_s: float = 2.0

    def reporter(self, run_id: str, upload_limit: int) -> HttpReporter:
        return HttpReporter(
            self.api_url,
            run_id,
            self.token,
            node=self.node,
            heartbeat_s=self.heartbeat_s,
            upload_limit=upload_limit,
        )


@dataclass(frozen=True)
class _Upload(ReportItem):
    """A report whose file is uploaded (to ``route``) before the batch that announces it;
    ``send_first``: the reports queued before it are sent before the upload."""

    route: str
    file: Path
    send_first: bool


class TokenRevoked(ReportFailed):
    """The API refused the run token: this attempt of the run is over."""


class HttpReporter(QueuedReporter):
    def __init__(
        self,
        api_url: str,
        run_id: str,
        token: str,
        *,
        node: str | None = None,
        heartbeat_s: float = 2.0,
        retry_for_s: float = RETRY_FOR_S,
        upload_limit: int = 4 * 1024**3,
    ):
        self.base = f"/api/runs/{run_id}/report"
        self.client = httpx.Client(
            base_url=api_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        self.node = node
        self.retry_for_s = retry_for_s
        self.upload_limit = upload_limit
        self._seq = 0
        self._cancelled = False
        self._revoked = False
        self._done = threading.Event()
        super().__init__(run_id)
        self._beat = threading.Thread(
            target=self._heartbeat_forever, args=(heartbeat_s,), daemon=True, name="heartbeat"
        )
        self._beat.start()

    def close(self) -> None:
        self._done.set()
        self.client.close()

    # -- what the run asks --------------------------------------------------------------

    def cancel_requested(self) -> bool:
        """Cancelled (or pruned), as of the last heartbeat; or the token was revoked."""
        return self._cancelled or self._revoked

    def run_spec(self, run_id: str) -> dict[str, Any]:
        spec: dict[str, Any] = self._request("GET", f"/inputs/{run_id}/spec").json()
        return spec

    def checkpoint_input(
        self, run_id: str, step: int | None, run_dir: Path
    ) -> artifacts.Checkpoint | None:
        """Downloaded from the API (the API's newest, for ``step`` None), unless this node
        already has that step."""
        if step is not None and (found := artifacts.find_checkpoint(run_dir, step)) is not None:
            return found
        params = {} if step is None else {"step": step}
        with tempfile.TemporaryDirectory(prefix="nnx-ppo-input-") as tmp:
            archive = Path(tmp) / "checkpoint.tar.gz"
            response = self._download(f"/inputs/{run_id}/checkpoint", params, archive)
            if response is None:
                return None
            got = int(response.headers["X-Checkpoint-Step"])
            return artifacts.install_checkpoint(archive, run_dir, got, self.upload_limit)

    # -- reports ------------------------------------------------------------------------

    def upload_log(self, path: Path) -> None:
        """The run process's output file, appended to the run's log on the API's side
        (once, at the end: a retry after an unanswered request may append it twice)."""
        if path.is_file():
            self._upload("/log", path)

    def video(self, step: int, path: Path, episode_reward: float, episode_length: int) -> None:
        item = ReportItem.video(step, path.name, episode_reward, episode_length)
        self._put(_Upload(item.kind, item.payload, f"/videos/{path.name}", path, False))

    def checkpoint(self, checkpoint: artifacts.Checkpoint) -> None:
        # The archive is built now: the folder may be pruned before the writer gets to it.
        archive = artifacts.checkpoint_archive(checkpoint.path.parent.parent, checkpoint)
        payload = checkpoint_public(self.run_id, checkpoint)
        # The metrics up to the checkpoint are stored before it is uploaded.
        self._put(_Upload("checkpoint", payload, f"/checkpoints/{checkpoint.step}", archive, True))

    def _write(self, items: list[ReportItem]) -> None:
        """The items as one batch (``POST .../batch``), after the uploads they announce."""
        batch: list[dict[str, Any]] = []
        for item in items:
            if isinstance(item, _Upload):
                if item.send_first:
                    self._send(batch)
                    batch = []
                self._upload(item.route, item.file)
            batch.append(item.wire())
        self._send(batch)

    def _send(self, batch: list[dict[str, Any]]) -> None:
        if not batch:
            return
        self._seq += 1
        self._request("POST", "/batch", json={"seq": self._seq, "items": batch})

    def _upload(self, path: str, file: Path) -> None:
        headers = upload_headers(file)
        self._request("PUT", path, content=lambda: file_chunks(file), headers=headers)

    def _download(self, path: str, params: dict[str, Any], into: Path) -> httpx.Response | None:
        deadline = time.monotonic() + self.retry_for_s
        attempt = 0
        while True:
            try:
                with self.client.stream("GET", self.base + path, params=params) as response:
                    if response.status_code == 404:
                        return None
                    if response.status_code not in TRANSIENT_STATUSES:
                        self._check(response)
                        with open(into, "wb") as out:
                            for chunk in response.iter_bytes(CHUNK):
                                out.write(chunk)
                        return response
            except httpx.TransportError:
                pass
            attempt = self._wait(attempt, deadline, path)

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request, retried while it fails transiently (see the module doc)."""
        deadline = time.monotonic() + self.retry_for_s
        attempt = 0
        while True:
            content = kwargs.get("content")
            sent = {**kwargs, "content": content()} if callable(content) else kwargs
            try:
                response = self.client.request(method, self.base + path, **sent)
                if response.status_code not in TRANSIENT_STATUSES:
                    self._check(response)
                    return response
            except httpx.TransportError:
                pass
            attempt = self._wait(attempt, deadline, path)

    def _wait(self, attempt: int, deadline: float, path: str) -> int:
        if time.monotonic() >= deadline:
            raise ReportFailed(f"the API did not take {path} for {self.retry_for_s:.0f} s")
        time.sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
        return attempt + 1

    def _check(self, response: httpx.Response) -> None:
        if response.status_code in (401, 403):
            self._revoked = True
            raise TokenRevoked(f"the API refused the run token ({response.status_code})")
        if response.status_code >= 400:
            raise ReportFailed(
                f"the API refused a report ({response.status_code}): {response.text}"
            )

    def _heartbeat_forever(self, every_s: float) -> None:
        while True:
            self._beat_once(every_s)
            if self._done.wait(every_s):
                return

    def _beat_once(self, every_s: float) -> None:
        try:
            response = self.client.post(
                self.base + "/heartbeat", json={"node": self.node}, timeout=every_s * 4
            )
        except (httpx.TransportError, RuntimeError):  # RuntimeError: the client was closed
            return
        if response.status_code in (401, 403):
            self._revoked = True
        elif response.status_code == 200:
            self._cancelled = bool(response.json().get("cancel_requested"))
