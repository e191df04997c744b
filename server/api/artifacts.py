"""A run's videos, checkpoints and logs."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import FileResponse, PlainTextResponse
from starlette.concurrency import run_in_threadpool

from server.api import policy_export
from server.api.deps import RunDep, ServicesDep, run_dir
from server.api.runs import NOT_FOUND
from server.schemas import CheckpointList, CheckpointPublic, ErrorPublic, VideoList, VideoPublic
from server.store import artifacts
from server.store.run_store import video_public

router = APIRouter(prefix="/runs", tags=["artifacts"])


@router.get("/{run_id}/videos", response_model=VideoList, responses=NOT_FOUND)
def list_videos(run: RunDep, services: ServicesDep) -> VideoList:
    items = [VideoPublic(**video_public(v)) for v in services.store.videos(run.id)]
    return VideoList(items=items, total=len(items))


@router.get("/{run_id}/videos/{video_id}", response_class=FileResponse, responses=NOT_FOUND)
def get_video(run: RunDep, video_id: int, services: ServicesDep) -> FileResponse:
    video = services.store.video(run.id, video_id) if 0 <= video_id < 2**62 else None
    if video is None:
        raise HTTPException(404, f"run {run.id} has no video {video_id}")
    directory = run_dir(services, run)
    try:
        path = artifacts.inside(directory, artifacts.videos_dir(directory) / video.filename)
    except artifacts.OutsideRunDir:
        raise HTTPException(404, f"run {run.id} has no video {video_id}") from None
    if not path.is_file():
        raise HTTPException(404, f"the file of video {video_id} is missing")
    return FileResponse(
        path,
        media_type="video/mp4",
        filename=f"{run.id}-{video.filename}",
        content_disposition_type="inline",
    )


def _checkpoint_public(run_id: str, c: artifacts.Checkpoint) -> CheckpointPublic:
    return CheckpointPublic(
        step=c.step,
        size_bytes=c.size_bytes,
        created_at=c.created_at,
        url=f"/api/runs/{run_id}/checkpoints/{c.step}",
    )


@router.get("/{run_id}/checkpoints", response_model=CheckpointList, responses=NOT_FOUND)
async def list_checkpoints(run: RunDep, services: ServicesDep) -> CheckpointList:
    found = await run_in_threadpool(artifacts.list_checkpoints, run_dir(services, run))
    items = [_checkpoint_public(run.id, c) for c in found]
    return CheckpointList(items=items, total=len(items))


@router.get("/{run_id}/checkpoints/{step}", response_class=FileResponse, responses=NOT_FOUND)
def get_checkpoint(run: RunDep, step: int, services: ServicesDep) -> FileResponse:
    directory = run_dir(services, run)
    checkpoint = artifacts.find_checkpoint(directory, step) if 0 <= step < 10**10 else None
    if checkpoint is None:
        raise HTTPException(404, f"run {run.id} has no checkpoint at step {step}")
    try:
        archive = artifacts.checkpoint_archive(directory, checkpoint)
    except artifacts.OutsideRunDir:
        raise HTTPException(404, f"run {run.id} has no checkpoint at step {step}") from None
    return FileResponse(
        archive, media_type="application/gzip", filename=f"{run.id}-{checkpoint.path.name}.tar.gz"
    )


@router.get(
    "/{run_id}/checkpoints/{step}/policy",
    response_class=FileResponse,
    responses={
        404: {"model": ErrorPublic, "description": "Unknown run, or no checkpoint at this step"},
        200: {
            "content": {"application/octet-stream": {}},
            "description": "The checkpoint's deterministic policy as a program that runs "
            "without nnx-ppo (exported on the first request, then kept): an ONNX model "
            "(onnxruntime) or a serialized jax.export program (StableHLO). Inputs: the "
            "observation ([B, ...]; an asymmetric network's policy key only), then a "
            "recurrent policy's state; outputs: the action, then the next state.",
        },
        422: {
            "model": ErrorPublic,
            "description": "The format cannot express this network (ONNX for a population "
            "graph's delayed reads); stablehlo exports every network",
        },
        500: {"model": ErrorPublic, "description": "The export failed"},
        501: {"model": ErrorPublic, "description": "The service lacks the export extra"},
    },
)
def get_policy(
    run: RunDep,
    step: int,
    services: ServicesDep,
    format: Annotated[
        Literal["onnx", "stablehlo"], Query(description="onnx, or stablehlo (jax.export)")
    ],
) -> FileResponse:
    directory = run_dir(services, run)
    checkpoint = artifacts.find_checkpoint(directory, step) if 0 <= step < 10**10 else None
    if checkpoint is None:
        raise HTTPException(404, f"run {run.id} has no checkpoint at step {step}")
    try:
        path = policy_export.policy_file(directory, checkpoint, format, run.spec)
    except artifacts.OutsideRunDir:
        raise HTTPException(404, f"run {run.id} has no checkpoint at step {step}") from None
    except policy_export.PolicyExportFailed as error:
        status = 501 if error.missing_extra else 422 if error.unsupported else 500
        raise HTTPException(status, str(error)) from None
    suffix = policy_export.FORMATS[format]
    return FileResponse(
        path,
        media_type="application/octet-stream",
        filename=f"{run.id}-{checkpoint.path.name}{suffix}",
    )


@router.get("/{run_id}/logs", response_class=PlainTextResponse, responses=NOT_FOUND)
def get_logs(
    run: RunDep,
    services: ServicesDep,
    tail: Annotated[int | None, Query(ge=0, le=100_000)] = None,
) -> PlainTextResponse:
    return PlainTextResponse(artifacts.log_tail(run_dir(services, run), tail))
