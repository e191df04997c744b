"""``GET /api/runs/{id}/export?format=tensorboard``: a run's scalars for other tools."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from server.api.deps import RunDep, ServicesDep
from server.api.runs import NOT_FOUND
from server.store.tensorboard_export import write_event_file

router = APIRouter(prefix="/runs", tags=["exports"])


@router.get(
    "/{run_id}/export",
    response_class=FileResponse,
    responses={
        **NOT_FOUND,
        200: {
            "content": {"application/octet-stream": {}},
            "description": "A TensorBoard event file (events.out.tfevents.*) of every scalar "
            "at its step and wall time; put it in a log dir and run `tensorboard --logdir`.",
        },
    },
)
def export_run(
    run: RunDep,
    services: ServicesDep,
    format: Annotated[Literal["tensorboard"], Query(description="The export's format")],
) -> FileResponse:
    engine = services.store.engine
    directory = Path(tempfile.mkdtemp(prefix=f"export-{run.id}-"))
    try:
        path = write_event_file(engine, run.id, directory)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return FileResponse(
        path,
        media_type="application/octet-stream",
        filename=f"events.out.tfevents.{int(run.created_at)}.nnx-ppo.{run.id}",
        background=BackgroundTask(shutil.rmtree, directory, ignore_errors=True),
    )
