"""Sweeps: submit (every value the space can give is checked first), list, read, cancel,
delete, and the sweep's events on a websocket.

A sweep's trials are ordinary runs (``GET /api/runs?sweep_id=...``); the sweep driver
(``server.api.sweep_driver``) queues them.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Response, WebSocket
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from server.api import runs as runs_api
from server.api.deps import (
    SWEEP_ID,
    ServicesDep,
    SweepDep,
    SweepServicesDep,
    get_sweep_services,
)
from server.api.seq_hub import follow
from server.api.sweep_driver import objective_of
from server.schemas import ErrorPublic, RunCreate
from server.spec.checker import CheckerUnavailable
from server.spec.run_checks import problem
from server.spec.sweep_space import MAX_CHECKS, PathError, SweepCreate, variants, with_values
from server.store.models import RunRow, SweepRow
from server.store.run_status import RunStatus
from server.store.sweep_store import FINISHED, SweepActive, SweepFilter, SweepNotFound
from server.user_text import PlainText

router = APIRouter(prefix="/sweeps", tags=["sweeps"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorPublic, "description": "Unknown sweep"}
}


# -- bodies -------------------------------------------------------------------------------


class TrialPublic(BaseModel):
    trial: int
    run_id: str
    status: RunStatus
    params: dict[str, Any] = Field(description="The trial's values, by spec path.")
    objective: float | None = Field(
        description="The objective metric's newest finite value (final once it finished)."
    )
    steps: int
    total_steps: int
    error: str | None = Field(description="Why it failed, or why it was pruned.")
    created_at: float
    started_at: float | None
    finished_at: float | None


class SweepPublic(BaseModel):
    id: str
    name: str
    env: str = Field(description="The base spec's env.")
    status: str = Field(description="running, cancelling, finished, cancelled or failed.")
    method: str
    objective: dict[str, str]
    max_trials: int
    parallel: int
    created_at: float
    finished_at: float | None
    error: str | None
    last_seq: int = Field(description="The seq of its newest stream event.")
    trial_counts: dict[str, int] = Field(description="Its trials by status.")
    best: TrialPublic | None = Field(description="The best finished trial.")


class SweepDetail(SweepPublic):
    request: dict[str, Any] = Field(
        description="The sweep as submitted: spec, space, method, objective, pruner, ..."
    )
    trials: list[TrialPublic]


class SweepList(BaseModel):
    items: list[SweepPublic]
    total: int


def trial_public(run: RunRow, metric: str) -> TrialPublic:
    return TrialPublic(
        trial=run.trial or 0,
        run_id=run.id,
        status=RunStatus(run.status),
        params=run.trial_params or {},
        objective=objective_of(run, metric),
        steps=run.steps,
        total_steps=run.total_steps,
        error=run.error,
        created_at=run.created_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
    )


def best_trial(trials: list[TrialPublic], mode: str) -> TrialPublic | None:
    done = [t for t in trials if t.status is RunStatus.SUCCEEDED and t.objective is not None]
    if not done:
        return None
    sign = 1.0 if mode == "max" else -1.0
    return max(done, key=lambda t: (sign * (t.objective or 0.0), -t.trial))


def sweep_public(sweep: SweepRow, runs: list[RunRow], *, detail: bool = False) -> SweepPublic:
    request = SweepCreate.model_validate(sweep.request)
    metric = request.objective.metric
    trials = [trial_public(r, metric) for r in runs]
    counts: dict[str, int] = {}
    for t in trials:
        counts[t.status.value] = counts.get(t.status.value, 0) + 1
    fields: dict[str, Any] = {
        "id": sweep.id,
        "name": sweep.name,
        "env": request.spec.env.name,
        "status": sweep.status,
        "method": request.method,
        "objective": {"metric": metric, "mode": request.objective.mode},
        "max_trials": request.trials(),
        "parallel": request.parallel,
        "created_at": sweep.created_at,
        "finished_at": sweep.finished_at,
        "error": sweep.error,
        "last_seq": sweep.last_seq,
        "trial_counts": counts,
        "best": best_trial(trials, request.objective.mode),
    }
    if detail:
        return SweepDetail(**fields, request=sweep.request, trials=trials)
    return SweepPublic(**fields)


# -- checks -------------------------------------------------------------------------------


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check(services: ServicesDep, request: SweepCreate) -> tuple[SweepCreate, int]:
    """Checks the base spec (its left-out fields taken from the env's preset, as a run's)
    and every extreme of the space with the runs' own checks (422 naming ``spec.<field>``
    or ``space.<path>``); returns the request with that base spec, and its steps."""
    try:
        request = request.model_copy(update={"spec": runs_api.with_preset(services, request.spec)})
        base_total = runs_api.validate(services, request.spec)
    except RequestValidationError as error:
        raise RequestValidationError(
            [{**e, "loc": ["body", "spec", *list(e["loc"])[1:]]} for e in error.errors()]
        ) from None
    _check_objective(services, request)
    if request.method == "grid" and request.trials() > request.grid_size():
        raise runs_api.invalid(
            ("max_trials",), f"the grid has {request.grid_size()} points: at most that many"
        )
    checks = variants(request)
    if len(checks) > MAX_CHECKS:
        raise runs_api.invalid(
            ("space",),
            f"the space has {len(checks)} values to check (each bound and each choice); "
            f"at most {MAX_CHECKS}",
        )
    stored = request.spec.stored()
    problems: list[dict[str, Any]] = []
    for path, values in checks:
        loc = ("space", path) if path is not None else ("space",)
        if any(p["loc"][1:] == list(loc) for p in problems):
            continue  # one problem per path: its first failing value says it
        what = (
            f"value {_short(values[path])}"
            if path is not None
            else "the combination " + _short(values)
        )
        try:
            spec = RunCreate.model_validate(with_values(stored, values))
            runs_api.validate(services, spec)
        except PathError as error:
            problems.append(problem(loc, str(error)))
        except (ValidationError, RequestValidationError) as error:
            found = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'] if p != 'body')}: {e['msg']}"
                for e in error.errors()
            )
            problems.append(problem(loc, f"{what} gives an invalid run spec: {found}"))
    named = [p for p in problems if len(p["loc"]) > 2]
    if problems:  # each path whose values fail (a combination only when none alone does)
        raise RequestValidationError(named or problems)
    return request, base_total


def _check_objective(services: ServicesDep, request: SweepCreate) -> None:
    """422 on ``objective.metric`` when the base spec's runs will not report it (a sweep
    whose every objective stays null). ``system/`` metrics come from the run process's
    sampler and are not traced: they pass."""
    metric = request.objective.metric
    if metric.startswith("system/"):
        return
    try:
        known = services.checker.metric_keys(request.spec.stored())
    except CheckerUnavailable as error:
        raise HTTPException(503, str(error)) from None
    if known is not None and metric not in known:
        raise runs_api.invalid(
            ("objective", "metric"),
            f"the trials' runs will not report {metric!r}; they report: {', '.join(known)}",
        )


# -- routes -------------------------------------------------------------------------------


@router.post(
    "",
    status_code=201,
    response_model=SweepDetail,
    responses={422: {"description": "Invalid sweep, naming the field or the space's path"}},
)
def submit_sweep(
    request: SweepCreate, services: ServicesDep, sweeps: SweepServicesDep
) -> SweepPublic:
    request, base_total = _check(services, request)
    sweep = sweeps.store.create(
        request.model_dump(mode="json"),
        name=request.name or f"sweep-{request.spec.env.name}",
        base_total_steps=base_total,
    )
    sweeps.driver.wake()
    return sweep_public(sweep, [], detail=True)


@router.get("", response_model=SweepList)
def list_sweeps(
    sweeps: SweepServicesDep,
    status: Annotated[PlainText | None, Query(max_length=16)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
) -> SweepList:
    rows, total = sweeps.store.list_sweeps(SweepFilter(status=status, limit=limit, offset=offset))
    items = [sweep_public(s, sweeps.store.trials(s.id)) for s in rows]
    return SweepList(items=items, total=total)


@router.get("/{sweep_id}", response_model=SweepDetail, responses=NOT_FOUND)
def read_sweep(sweep: SweepDep, sweeps: SweepServicesDep) -> SweepPublic:
    return sweep_public(sweep, sweeps.store.trials(sweep.id), detail=True)


@router.post("/{sweep_id}/cancel", status_code=202, response_model=SweepPublic, responses=NOT_FOUND)
def cancel_sweep(sweep: SweepDep, sweeps: SweepServicesDep) -> SweepPublic:
    cancelled = sweeps.store.cancel(sweep.id)
    sweeps.driver.wake()
    return sweep_public(cancelled, sweeps.store.trials(sweep.id))


@router.delete(
    "/{sweep_id}",
    status_code=204,
    response_class=Response,
    responses={**NOT_FOUND, 409: {"model": ErrorPublic, "description": "Not finished"}},
)
def delete_sweep(sweep: SweepDep, sweeps: SweepServicesDep) -> Response:
    try:
        sweeps.store.delete(sweep.id)
    except SweepActive as error:
        raise HTTPException(409, str(error)) from None
    sweeps.driver.forget(sweep.id)
    return Response(status_code=204)


@router.websocket("/{sweep_id}/stream")
async def stream(websocket: WebSocket, sweep_id: str, after_seq: int = 0) -> None:
    """Every event of the sweep after ``after_seq``, in order, then live ones: ``status``
    (``status``, ``error``), ``trial`` (``trial``, ``run_id``, ``status``, ``params``,
    ``objective``, ``steps``, ``error``) and ``best`` (``trial``, ``run_id``,
    ``objective``, ``params``); closed normally (1000) after its final status."""
    sweeps = get_sweep_services(websocket)
    try:
        if not SWEEP_ID.fullmatch(sweep_id):
            raise SweepNotFound(sweep_id)
        sweep = await run_in_threadpool(sweeps.store.get, sweep_id)
    except SweepNotFound:
        await websocket.close(code=4404, reason="sweep not found")
        return
    if after_seq < 0:
        await websocket.close(code=1008, reason="after_seq must be >= 0")
        return
    await websocket.accept()
    if sweep.status in FINISHED and after_seq >= sweep.last_seq:
        await websocket.close(code=1000)
        return
    await follow(websocket, sweeps.hub, sweep_id, after_seq, final=_sweep_finished)


def _sweep_finished(event: dict[str, Any]) -> bool:
    return event["type"] == "status" and event["status"] in FINISHED
