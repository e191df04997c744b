"""``/api/runs/{run_id}/report/...``: how a run process on another node reports, with its
run token (never the admin token; ``server.store.run_reports``). A token opens these
routes for its own run alone, while it runs; it can read the spec and checkpoints of the
runs that its spec names (``teacher``, ``resume_from``).

Uploads (checkpoint archives, videos, recordings a tracked run's script made) are streamed
to a hidden file in the run's directory with their SHA-256 computed on the way, refused past
``max_upload_bytes`` or on a checksum that differs from ``X-Content-SHA256``, and moved into
place atomically: a retried upload replaces the file with the same bytes (a recording's gives
the recording stored the first time).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Request
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from server.api.deps import (
    RUN_ID,
    RecordingServices,
    RecordingServicesDep,
    ReportingRun,
    Services,
    ServicesDep,
    Token,
    lookup_run,
)
from server.recording import storage, upload
from server.store import artifacts, run_reports
from server.store.models import RecordingRow, RunRow
from server.store.run_reports import REPORT_KINDS, ReportItem, TokenRefused

router = APIRouter(prefix="/runs/{run_id}/report", tags=["report"], include_in_schema=False)

VIDEO_NAME = re.compile(r"step_\d{10}\.mp4")
ContentSha256 = Annotated[str, Header(pattern=r"^[0-9a-fA-F]{64}$")]
"""An upload's ``X-Content-SHA256`` header: the hex SHA-256 its body must have."""


class BatchIn(BaseModel):
    seq: int = Field(ge=1)
    items: list[dict[str, Any]] = Field(max_length=100_000)


class HeartbeatIn(BaseModel):
    node: str | None = Field(default=None, max_length=200)


@router.post("/batch")
def post_batch(
    run: ReportingRun, token: Token, batch: BatchIn, services: ServicesDep
) -> dict[str, Any]:
    items = [ReportItem(str(item.get("type")), item) for item in batch.items]
    if any(i.kind not in REPORT_KINDS for i in items):
        raise HTTPException(422, f"an item's type is not one of {', '.join(REPORT_KINDS)}")
    try:
        stored = run_reports.store_batch(services.store, run.id, token, batch.seq, items)
    except TokenRefused as error:
        raise HTTPException(401, str(error)) from None
    except (KeyError, TypeError, ValueError) as error:
        raise HTTPException(422, f"malformed report: {error!r}") from None
    return {"stored": stored}


@router.post("/heartbeat")
def post_heartbeat(
    run: ReportingRun, token: Token, beat: HeartbeatIn, services: ServicesDep
) -> dict[str, Any]:
    try:
        stop = run_reports.heartbeat(services.store, run.id, token, beat.node)
    except TokenRefused as error:
        raise HTTPException(401, str(error)) from None
    return {"cancel_requested": stop}


def _readable(services: Services, run: RunRow, source_id: str) -> RunRow:
    """The run itself, or one its spec names as teacher or resume_from; else 403."""
    named = {run.id} | {
        ref["run_id"]
        for ref in (run.spec.get("teacher"), run.spec.get("resume_from"))
        if isinstance(ref, dict) and "run_id" in ref
    }
    if source_id not in named or not RUN_ID.fullmatch(source_id):
        raise HTTPException(403, f"run {run.id}'s token cannot read run {source_id}")
    return lookup_run(services, source_id)


@router.get("/inputs/{source_id}/spec")
def get_spec(run: ReportingRun, source_id: str, services: ServicesDep) -> dict[str, Any]:
    return dict(_readable(services, run, source_id).spec)


@router.get("/inputs/{source_id}/checkpoint", response_class=FileResponse)
def get_input_checkpoint(
    run: ReportingRun, source_id: str, services: ServicesDep, step: int | None = None
) -> FileResponse:
    """A checkpoint of the run or of a run it names (the newest when ``step`` is unset), as
    a ``.tar.gz`` whose folder is ``step_X/``; header ``X-Checkpoint-Step``."""
    source = _readable(services, run, source_id)
    directory = services.settings.run_dir(source.id)
    checkpoint = artifacts.find_checkpoint(directory, step)
    if checkpoint is None:
        raise HTTPException(404, f"run {source.id} has no such checkpoint")
    archive = artifacts.checkpoint_archive(directory, checkpoint)
    return FileResponse(
        archive,
        media_type="application/gzip",
        headers={"X-Checkpoint-Step": str(checkpoint.step)},
    )


async def _receive(request: Request, directory: Path, expected_sha256: str, limit: int) -> Path:
    """The body in a hidden temporary file of ``directory``, checked (size, checksum)."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=directory, prefix=".upload-", suffix=".tmp")
    path = Path(name)
    digest, size = hashlib.sha256(), 0
    try:
        with os.fdopen(fd, "wb") as out:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise HTTPException(413, f"upload larger than {limit} bytes")
                digest.update(chunk)
                await run_in_threadpool(out.write, chunk)
        if digest.hexdigest() != expected_sha256.lower():
            raise HTTPException(422, "the upload's SHA-256 does not match X-Content-SHA256")
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path


@router.put("/checkpoints/{step}", status_code=201)
async def put_checkpoint(
    run: ReportingRun,
    step: int,
    request: Request,
    services: ServicesDep,
    x_content_sha256: ContentSha256,
) -> dict[str, Any]:
    """A checkpoint as a ``.tar.gz`` holding the one folder ``step_{step:010d}/``."""
    if not 0 <= step < 10**10:
        raise HTTPException(422, "step out of range")
    directory = services.settings.run_dir(run.id)
    limit = services.settings.max_upload_bytes
    archive = await _receive(request, artifacts.checkpoints_dir(directory), x_content_sha256, limit)
    try:
        await run_in_threadpool(artifacts.install_checkpoint, archive, directory, step, limit)
    except artifacts.BadArchive as error:
        status = 413 if isinstance(error, artifacts.ArchiveTooLarge) else 422
        raise HTTPException(status, str(error)) from None
    finally:
        archive.unlink(missing_ok=True)
    return {"step": step}


@router.put("/videos/{filename}", status_code=201)
async def put_video(
    run: ReportingRun,
    filename: str,
    request: Request,
    services: ServicesDep,
    x_content_sha256: ContentSha256,
) -> dict[str, Any]:
    if not VIDEO_NAME.fullmatch(filename):
        raise HTTPException(422, "a video's name is step_XXXXXXXXXX.mp4")
    videos = artifacts.videos_dir(services.settings.run_dir(run.id))
    upload = await _receive(request, videos, x_content_sha256, services.settings.max_upload_bytes)
    os.replace(upload, videos / filename)
    return {"filename": filename}


@router.put("/recordings/{name}", status_code=201)
async def put_recording(
    run: ReportingRun,
    name: str,
    request: Request,
    services: ServicesDep,
    recordings: RecordingServicesDep,
    x_content_sha256: ContentSha256,
) -> dict[str, Any]:
    """A recording the run's script made, as ``server.recording.upload`` describes; stored
    as one of the run's recordings. ``name`` (32 hex digits) is the script's for it: a
    retried upload gives the recording stored the first time."""
    if not upload.UPLOAD_NAME.fullmatch(name):
        raise HTTPException(422, "a recording upload's name is 32 hexadecimal digits")
    directory = services.settings.run_dir(run.id)
    marker = storage.recordings_dir(directory) / f".uploaded-{name}"
    stored = _marked(marker)
    if stored is not None:
        return {"id": stored}
    limit = services.settings.max_upload_bytes
    received = await _receive(request, storage.recordings_dir(directory), x_content_sha256, limit)
    try:
        row = await run_in_threadpool(
            _store_recording, services, recordings, run.id, received, marker
        )
    except upload.BadRecording as error:
        raise HTTPException(422, f"not a recording: {error}") from None
    finally:
        received.unlink(missing_ok=True)
    return {"id": row.id}


def _store_recording(
    services: Services, recordings: RecordingServices, run_id: str, received: Path, marker: Path
) -> RecordingRow:
    directory = services.settings.run_dir(run_id)
    staging, manifest = upload.stage_upload(
        received, directory, run_id, services.settings.recording_max_bytes
    )
    try:
        row = recordings.store.add_uploaded(
            run_id,
            manifest,
            lambda recording_id: storage.publish(
                staging, storage.recording_dir(directory, recording_id)
            ),
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone when published
    fd, tmp = tempfile.mkstemp(dir=marker.parent, prefix=".", suffix=".tmp")
    with os.fdopen(fd, "w") as out:
        out.write(str(row.id))
    os.replace(tmp, marker)  # whole or absent
    return row


def _marked(marker: Path) -> int | None:
    """The id of the recording an upload of this name stored, if one did."""
    try:
        return int(marker.read_text())
    except (OSError, ValueError):
        return None


@router.put("/log", status_code=201)
async def put_log(
    run: ReportingRun,
    request: Request,
    services: ServicesDep,
    x_content_sha256: ContentSha256,
) -> dict[str, Any]:
    """The run process's output file from its node, appended to the run's log (which so
    holds every attempt's, as the local executor's does)."""
    logs = artifacts.logs_dir(services.settings.run_dir(run.id))
    upload = await _receive(request, logs, x_content_sha256, services.settings.max_upload_bytes)
    try:
        await run_in_threadpool(_append_file, upload, logs / artifacts.LOG_FILE)
    finally:
        upload.unlink(missing_ok=True)
    return {"appended": True}


def _append_file(source: Path, target: Path) -> None:
    with open(source, "rb") as src, open(target, "ab") as out:
        shutil.copyfileobj(src, out)
