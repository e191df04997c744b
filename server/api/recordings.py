"""A run's activation recordings: request (queued for the recording runner), list, read,
cancel, download (``.npz``, video), and the dashboard's reads (one env and one population
at a time: a downsampled slice, a 2-D projection)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool

from server.api.deps import (
    RecordingDep,
    RecordingServices,
    RecordingServicesDep,
    RunDep,
    Services,
    ServicesDep,
    run_dir,
)
from server.recording import reads, storage
from server.schemas import (
    ErrorPublic,
    RecordingCreate,
    RecordingDetail,
    RecordingList,
    RecordingPca,
    RecordingPublic,
    RecordingSlice,
)
from server.spec.checker import CheckerUnavailable
from server.store.artifacts import Checkpoint, find_checkpoint
from server.store.models import RecordingRow, RunRow
from server.store.recording_status import RecordingStatus, RecordingTransitionError
from server.store.recording_store import (
    RecordingNotFound,
    RecordingRequest,
    recording_public,
)

router = APIRouter(prefix="/runs", tags=["recordings"])
RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorPublic, "description": "Unknown run or recording"},
    409: {"model": ErrorPublic, "description": "The recording has not succeeded (yet)"},
    422: {"model": ErrorPublic, "description": "A bad field, named"},
}
MAX_POINTS = 4096


def _invalid(loc: tuple[Any, ...], msg: str) -> RequestValidationError:
    return RequestValidationError([{"loc": list(loc), "msg": msg, "type": "value_error"}])


def _checkpoint(services: Services, run: RunRow, step: int | None) -> Checkpoint:
    found = find_checkpoint(run_dir(services, run), step)
    if found is None:
        what = "no checkpoint" if step is None else f"no checkpoint at step {step}"
        raise _invalid(("body", "step"), f"run {run.id} has {what}")
    return found


def _shape(
    services: Services, recordings: RecordingServices, run: RunRow, checkpoint: Checkpoint
) -> dict[str, Any]:
    key = (run.id, checkpoint.step, checkpoint.created_at)
    with recordings.lock:
        cached = recordings.shapes.get(key)
    if cached is not None:
        return cached
    try:
        answer = services.checker.recording_shape(run.spec, str(checkpoint.path))
    except CheckerUnavailable as error:
        raise HTTPException(503, str(error)) from None
    except ValueError as error:
        raise _invalid(("body", "step"), f"cannot record this checkpoint: {error}") from None
    with recordings.lock:
        if len(recordings.shapes) > 256:
            recordings.shapes.clear()
        recordings.shapes[key] = answer
    return answer


def size_problems(request: RecordingCreate, units: dict[str, int], limit: int) -> list[Any]:
    """The 422 entries of a recording larger than ``limit`` bytes (none when it fits)."""
    total_units = sum(units.values())
    size = request.episode_length * request.n_envs * total_units * 4
    if size <= limit:
        return []
    msg = (
        f"the recording would take {size} bytes ({size / 1024**3:.2f} GiB: T "
        f"{request.episode_length} x N {request.n_envs} x {total_units} units x 4 bytes), "
        f"over the limit of {limit} bytes (NNX_PPO_RECORDING_MAX_BYTES): record fewer steps "
        "or envs"
    )
    return [
        {"loc": ["body", name], "msg": msg, "type": "value_error"}
        for name in ("episode_length", "n_envs")
    ]


def _create(
    services: Services, recordings: RecordingServices, run: RunRow, request: RecordingCreate
) -> RecordingRow:
    checkpoint = _checkpoint(services, run, request.step)
    answer = _shape(services, recordings, run, checkpoint)
    units = {str(k): int(v) for k, v in answer["units"].items()}
    problems = size_problems(request, units, services.settings.recording_max_bytes)
    if request.video and not answer["renderable"]:
        problems.append(
            {
                "loc": ["body", "video"],
                "msg": f"the env {run.spec['env']['name']} cannot be rendered (the built-in "
                "pure-JAX envs have no render): record without video",
                "type": "value_error",
            }
        )
    if problems:
        raise RequestValidationError(problems)
    return recordings.store.create(
        RecordingRequest(
            run_id=run.id,
            step=checkpoint.step,
            n_envs=request.n_envs,
            episode_length=request.episode_length,
            seed=request.seed,
            video=request.video,
            estimated_bytes=request.episode_length * request.n_envs * sum(units.values()) * 4,
        )
    )


@router.post(
    "/{run_id}/recordings", status_code=201, response_model=RecordingPublic, responses=RESPONSES
)
async def create_recording(
    run: RunDep,
    request: RecordingCreate,
    services: ServicesDep,
    recordings: RecordingServicesDep,
) -> RecordingPublic:
    row = await run_in_threadpool(_create, services, recordings, run, request)
    return RecordingPublic(**recording_public(row))


@router.get("/{run_id}/recordings", response_model=RecordingList, responses=RESPONSES)
async def list_recordings(run: RunDep, recordings: RecordingServicesDep) -> RecordingList:
    rows = await run_in_threadpool(recordings.store.of_run, run.id)
    items = [RecordingPublic(**recording_public(r)) for r in rows]
    return RecordingList(items=items, total=len(items))


@router.get(
    "/{run_id}/recordings/{recording_id}", response_model=RecordingDetail, responses=RESPONSES
)
def get_recording_detail(recording: RecordingDep) -> RecordingDetail:
    return RecordingDetail(**recording_public(recording, manifest=True))


@router.post(
    "/{run_id}/recordings/{recording_id}/cancel",
    status_code=202,
    response_model=RecordingPublic,
    responses=RESPONSES,
)
def cancel_recording(recording: RecordingDep, recordings: RecordingServicesDep) -> RecordingPublic:
    try:
        row = recordings.store.request_cancel(recording.run_id, recording.id)
    except RecordingTransitionError as error:
        raise HTTPException(409, str(error)) from None
    except RecordingNotFound as error:
        raise HTTPException(404, str(error)) from None
    return RecordingPublic(**recording_public(row))


def _stored(services: Services, recording: RecordingRow) -> tuple[Path, dict[str, Any]]:
    """The folder and manifest of a recording that succeeded (409 otherwise)."""
    if recording.status != RecordingStatus.SUCCEEDED or recording.manifest is None:
        raise HTTPException(409, f"recording {recording.id} is {recording.status}: it has no data")
    directory = storage.recording_dir(services.settings.run_dir(recording.run_id), recording.id)
    if not (directory / storage.MANIFEST).is_file():
        raise HTTPException(404, f"the files of recording {recording.id} are missing")
    return directory, recording.manifest


@router.get(
    "/{run_id}/recordings/{recording_id}/data",
    response_class=FileResponse,
    responses={
        **RESPONSES,
        200: {
            "content": {"application/octet-stream": {}},
            "description": "The recording as an .npz (np.load(path, allow_pickle=False)): one "
            "[T, N, ...] array per population or module path, named by it, and dones, obs, "
            "actions, rewards.",
        },
    },
)
async def get_recording_data(recording: RecordingDep, services: ServicesDep) -> FileResponse:
    directory, _ = _stored(services, recording)
    path = await _read(storage.npz_file, directory)
    return FileResponse(
        path,
        media_type="application/octet-stream",
        filename=f"{recording.run_id}-recording-{recording.id}.npz",
    )


@router.get(
    "/{run_id}/recordings/{recording_id}/video",
    response_class=FileResponse,
    responses=RESPONSES,
)
def get_recording_video(recording: RecordingDep, services: ServicesDep) -> FileResponse:
    directory, manifest = _stored(services, recording)
    if not manifest.get("video") or not (directory / storage.VIDEO).is_file():
        raise HTTPException(404, f"recording {recording.id} has no video")
    return FileResponse(
        directory / storage.VIDEO,
        media_type="video/mp4",
        filename=f"{recording.run_id}-recording-{recording.id}.mp4",
        content_disposition_type="inline",
    )


async def _read(function: Any, *args: Any) -> Any:
    """A read of a stored recording's files off the event loop (404 when they are
    unreadable: missing, or not what the manifest says)."""
    try:
        return await run_in_threadpool(function, *args)
    except storage.RecordingUnreadable as error:
        raise HTTPException(404, str(error)) from None


def _checked_read(manifest: dict[str, Any], key: str, env: int) -> None:
    arrays = manifest["arrays"]
    if key not in arrays or arrays[key]["kind"] != "activations":
        names = sorted(manifest.get("populations", {}))
        raise _invalid(("query", "key"), f"not a population of this recording; it has {names}")
    if env >= manifest["n_envs"]:
        raise _invalid(("query", "env"), f"must be below {manifest['n_envs']} (n_envs)")


@router.get(
    "/{run_id}/recordings/{recording_id}/slice",
    response_model=RecordingSlice,
    responses=RESPONSES,
)
async def get_recording_slice(
    recording: RecordingDep,
    services: ServicesDep,
    key: Annotated[str, Query(max_length=500, description="A population or module path.")],
    env: Annotated[int, Query(ge=0)] = 0,
    t0: Annotated[int, Query(ge=0)] = 0,
    t1: Annotated[int | None, Query(ge=1, description="End step (excluded); null: T.")] = None,
    max_points: Annotated[int, Query(ge=1, le=MAX_POINTS)] = 1000,
) -> RecordingSlice:
    directory, manifest = _stored(services, recording)
    _checked_read(manifest, key, env)
    end = manifest["episode_length"] if t1 is None else t1
    if not t0 < end <= manifest["episode_length"]:
        raise _invalid(
            ("query", "t1"), f"must be above t0 ({t0}) and at most {manifest['episode_length']}"
        )
    read = await _read(reads.time_slice, directory, manifest, key, env, t0, end, max_points)
    return RecordingSlice(key=key, env=env, t0=t0, t1=end, **read)


@router.get(
    "/{run_id}/recordings/{recording_id}/pca",
    response_model=RecordingPca,
    responses=RESPONSES,
)
async def get_recording_pca(
    recording: RecordingDep,
    services: ServicesDep,
    key: Annotated[str, Query(max_length=500, description="A population or module path.")],
    env: Annotated[int, Query(ge=0)] = 0,
    max_points: Annotated[int, Query(ge=1, le=MAX_POINTS)] = 1000,
) -> RecordingPca:
    directory, manifest = _stored(services, recording)
    _checked_read(manifest, key, env)
    read = await _read(reads.pca, directory, manifest, key, env, max_points)
    return RecordingPca(key=key, env=env, **read)
