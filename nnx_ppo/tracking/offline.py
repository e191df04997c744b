"""Offline tracked runs: ``track(..., mode="offline")`` records the run in a directory,
and ``sync`` (``nnx-ppo sync DIR``) uploads it later as the same run.

The directory holds ``run.json`` (name, config, tags, notes, total steps), ``reports.jsonl``
(the reports in order, one JSON object a line: ``{"item": ...}`` or ``{"upload": {"route",
"file", "announce"}}``), the uploaded files under ``files/``, and ``finish.json`` (the
outcome) once the script ends. ``sync`` writes ``synced.json`` (the run's id and run
token) before it sends anything, and sends the reports in batches cut the same way every
time: a sync that was interrupted and run again continues the same run, and the service
stores each batch once (by seq).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from nnx_ppo.tracking.http import ReportClient, RunEnded, TrackingError
from nnx_ppo.tracking.service import create_tracked_run
from nnx_ppo.tracking.transport import Entry, Upload

RUN_FILE = "run.json"
REPORTS_FILE = "reports.jsonl"
FINISH_FILE = "finish.json"
SYNCED_FILE = "synced.json"
FILES_DIR = "files"
SYNC_BATCH_ITEMS = 500


def _write_json(path: Path, value: Any) -> None:
    """Written whole or not at all (a temporary file renamed into place)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(value, indent=1))
    os.replace(tmp, path)


class OfflineWriter:
    """``Transport``'s interface, writing to a directory instead of the service."""

    cancel_requested = False
    ended: TrackingError | None = None
    dropped = 0

    def __init__(self, directory: Path, meta: Mapping[str, Any]):
        self.directory = directory
        if (directory / REPORTS_FILE).exists():
            raise FileExistsError(f"{directory} already holds an offline run")
        (directory / FILES_DIR).mkdir(parents=True, exist_ok=True)
        _write_json(directory / RUN_FILE, {**meta, "created_at": time.time()})
        self._reports = open(directory / REPORTS_FILE, "a", encoding="utf-8")  # noqa: SIM115

    def put(self, entry: Entry) -> bool:
        if isinstance(entry, Upload):
            target = self.directory / FILES_DIR / entry.route.strip("/").replace("/", "_")
            (shutil.move if entry.owned else shutil.copyfile)(entry.file, target)
            line = {
                "upload": {
                    "route": entry.route,
                    "file": str(target.relative_to(self.directory)),
                    "announce": entry.announce,
                }
            }
        else:
            line = {"item": entry}
        self._reports.write(json.dumps(line) + "\n")
        self._reports.flush()
        return True

    def pending(self) -> int:
        return 0

    def flush(self, timeout_s: float) -> bool:
        self._reports.flush()
        os.fsync(self._reports.fileno())
        return True

    def close(self, timeout_s: float) -> int:
        self.flush(timeout_s)
        self._reports.close()
        return 0

    def finish(self, status: str, error: str | None) -> None:
        _write_json(self.directory / FINISH_FILE, {"status": status, "error": error})


def sync(directory: str | os.PathLike[str], url: str, token: str | None) -> str:
    """Uploads the offline run in ``directory`` to the service at ``url`` and returns its
    run id (the same run however often it is synced; see the module doc).

    Raises:
        FileNotFoundError: ``directory`` holds no offline run.
        nnx_ppo.client.ClientError: The service cannot be reached or refused the run.
        TrackingError: A report could not be delivered.
    """
    folder = Path(directory)
    meta = json.loads((folder / RUN_FILE).read_text())
    synced_path = folder / SYNCED_FILE
    synced = json.loads(synced_path.read_text()) if synced_path.exists() else None
    if synced is not None and synced.get("finished"):
        return str(synced["run_id"])
    if synced is None:
        run_id, run_token = create_tracked_run(
            url,
            token,
            name=meta["name"],
            config=meta.get("config") or {},
            tags=meta.get("tags") or (),
            notes=meta.get("notes") or "",
            total_steps=int(meta.get("total_steps") or 0),
        )
        synced = {"run_id": run_id, "token": run_token, "url": url, "finished": False}
        _write_json(synced_path, synced)
    client = ReportClient(url, synced["run_id"], synced["token"], retry_for_s=600.0)
    try:
        for seq, items in enumerate(_batches(folder, client, synced["run_id"]), start=1):
            client.send_batch(seq, items)
        outcome = _outcome(folder)
        if outcome is not None:
            # RunEnded: it ended otherwise there (crashed, say, while an earlier sync ran)
            with contextlib.suppress(RunEnded):
                client.finish(outcome["status"], outcome.get("error"))
            _write_json(synced_path, {**synced, "finished": True})
    finally:
        client.close()
    return str(synced["run_id"])


def _outcome(folder: Path) -> dict[str, Any] | None:
    path = folder / FINISH_FILE
    return json.loads(path.read_text()) if path.exists() else None


def _batches(folder: Path, client: ReportClient, run_id: str) -> Iterator[list[dict[str, Any]]]:
    """The reports as batches of at most ``SYNC_BATCH_ITEMS``, cut before each upload's
    announcement (its file uploaded first): the same batches on every sync. A
    checkpoint's announcement gets the run's URL (unknown offline)."""
    batch: list[dict[str, Any]] = []
    with open(folder / REPORTS_FILE, encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            entry = json.loads(line)
            if "upload" in entry:
                if batch:
                    yield batch
                    batch = []
                upload = entry["upload"]
                client.upload(upload["route"], folder / upload["file"])
                announce = dict(upload["announce"])
                if announce.get("type") == "checkpoint":
                    announce["url"] = f"/api/runs/{run_id}/checkpoints/{announce['step']}"
                batch.append(announce)
            else:
                batch.append(entry["item"])
            if len(batch) >= SYNC_BATCH_ITEMS:
                yield batch
                batch = []
    if batch:
        yield batch


def offline_runs(directories: Sequence[str]) -> list[Path]:
    """The offline run folders among ``directories`` (each one, or its subfolders)."""
    found = []
    for name in directories:
        path = Path(name)
        if (path / RUN_FILE).exists():
            found.append(path)
        elif path.is_dir():
            found += sorted(p.parent for p in path.glob(f"*/{RUN_FILE}"))
    return found
