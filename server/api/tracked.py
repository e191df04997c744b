"""Tracked runs (``nnx_ppo.track``): ``POST /api/runs/track`` creates one for a script
outside the service and returns its run token; the script reports through
``/api/runs/{id}/report/...`` (``server.api.report``) like a remote run process, and ends
the run with ``POST /api/runs/{id}/report/finish``. See ``server.store.tracked_runs``."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from server.api.deps import ServicesDep, Token, lookup_run
from server.api.runs import run_public
from server.schemas import TrackCreate, TrackedRunPublic
from server.store import tracked_runs
from server.store.run_status import RunStatus

router = APIRouter(prefix="/runs", tags=["runs"])
finish_router = APIRouter(prefix="/runs/{run_id}/report", include_in_schema=False)

KINDS = ("ppo", "distillation")


class FinishIn(BaseModel):
    status: Literal["succeeded", "failed", "cancelled"]
    error: str | None = Field(default=None, max_length=10_000)


def _total_steps(kind: str, config: dict[str, Any]) -> int:
    section = config.get("config", {})
    loop = section.get(kind) if isinstance(section, dict) else None
    total = loop.get("total_steps") if isinstance(loop, dict) else None
    return total if isinstance(total, int) and not isinstance(total, bool) and total > 0 else 0


@router.post(
    "/track",
    status_code=201,
    response_model=TrackedRunPublic,
    responses={422: {"description": "Invalid name, tags or config"}},
)
def track_run(body: TrackCreate, services: ServicesDep) -> TrackedRunPublic:
    """A tracked run: trained by a script outside the service, which reports with the
    returned run token (``nnx_ppo.track``). It is ``running`` at once, never queued."""
    if any(not 0 < len(t) <= 64 for t in body.tags):
        raise HTTPException(422, "tags must be 1 to 64 characters long")
    kind = body.config.get("kind")
    kind = kind if kind in KINDS else "ppo"
    run, token = tracked_runs.create(
        services.store,
        name=body.name,
        spec=body.config,
        kind=kind,
        tags=body.tags,
        notes=body.notes,
        total_steps=body.total_steps or _total_steps(kind, body.config),
    )
    return TrackedRunPublic(
        run=run_public(run),
        token=token,
        timeout_seconds=services.settings.tracked_timeout_seconds,
    )


@finish_router.post("/finish")
def finish_run(run_id: str, token: Token, body: FinishIn, services: ServicesDep) -> dict[str, Any]:
    """Ends the tracked run (idempotent: a retry of a finish that was stored is a 200)."""
    run = lookup_run(services, run_id)
    try:
        ended = tracked_runs.finish(
            services.store, run.id, token, RunStatus(body.status), body.error
        )
    except tracked_runs.FinishRefused as error:
        raise HTTPException(409, str(error)) from None
    return {"status": ended.status}
