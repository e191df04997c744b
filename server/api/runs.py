"""Runs: submit, list, read, edit, cancel, delete."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Response
from fastapi.exceptions import RequestValidationError
from starlette.concurrency import run_in_threadpool

from server.api.deps import RUN_ID, RunDep, Services, ServicesDep, run_dir
from server.schemas import (
    CheckpointRef,
    ErrorPublic,
    NetworkSpec,
    RunCreate,
    RunList,
    RunPublic,
    RunUpdate,
)
from server.spec.checker import CheckerUnavailable
from server.spec.resources import resource_errors
from server.store.artifacts import find_checkpoint
from server.store.models import RunRow
from server.store.run_status import RunStatus, TransitionError
from server.store.run_store import RunFilter, RunNotFound

router = APIRouter(prefix="/runs", tags=["runs"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorPublic, "description": "Unknown run"}
}


def run_public(run: RunRow) -> RunPublic:
    return RunPublic.model_validate(run, from_attributes=True)


def _invalid(loc: tuple[Any, ...], msg: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ["body", *loc], "msg": msg, "type": "value_error"}])


def _referenced_run(services: Services, ref: CheckpointRef, field: str) -> RunRow:
    """The run a ``teacher``/``resume_from`` names, which must have that checkpoint."""
    try:
        if not RUN_ID.fullmatch(ref.run_id):
            raise RunNotFound(ref.run_id)
        source = services.store.get(ref.run_id)
    except RunNotFound:
        raise _invalid((field, "run_id"), f"no run {ref.run_id!r}") from None
    if find_checkpoint(run_dir(services, source), ref.step) is None:
        what = "no checkpoint" if ref.step is None else f"no checkpoint at step {ref.step}"
        raise _invalid(
            (field, "step" if ref.step is not None else "run_id"), f"run {ref.run_id} has {what}"
        )
    return source


def _validate(services: Services, spec: RunCreate) -> int:
    """Everything about ``spec`` that a schema cannot see; returns its total steps."""
    teacher_network = None
    resume_checkpoint: str | None = None
    resume_at: tuple[str, int] | None = None  # (run, step) of the checkpoint resumed
    if spec.teacher is not None:
        teacher = _referenced_run(services, spec.teacher, "teacher")
        if teacher.kind != "ppo":
            raise _invalid(("teacher", "run_id"), "a teacher must be a PPO run")
        teacher_network = NetworkSpec(**teacher.spec["network"]).factory_fields()
    if spec.resume_from is not None:
        source = _referenced_run(services, spec.resume_from, "resume_from")
        if source.kind != spec.kind:
            raise _invalid(
                ("resume_from", "run_id"),
                f"run {source.id} is a {source.kind} run, this one {spec.kind}",
            )
        if source.spec["env"]["name"] != spec.env.name:
            raise _invalid(
                ("env", "name"),
                f"must be {source.spec['env']['name']!r}, the env of run {source.id}",
            )
        found = find_checkpoint(run_dir(services, source), spec.resume_from.step)
        resume_checkpoint = str(found.path) if found is not None else None
        resume_at = (source.id, found.step) if found is not None else None
    errors = resource_errors(spec.resources, spec.config, services.store.workers())
    if errors:
        raise RequestValidationError(errors)
    try:
        errors, total = services.checker.check(spec.stored(), teacher_network, resume_checkpoint)
    except CheckerUnavailable as error:
        raise HTTPException(503, str(error)) from None
    if resume_at is not None and 0 < total <= resume_at[1]:  # 0: the config is refused
        section = "distillation" if spec.kind == "distillation" else "ppo"
        errors.append(
            {
                "loc": ["body", "config", section, "total_steps"],
                "msg": f"must exceed {resume_at[1]}, the step of the checkpoint of resume_from "
                f"(run {resume_at[0]}): the run trains on from there to total_steps",
                "type": "value_error",
            }
        )
    if errors:
        raise RequestValidationError(errors)
    return total


def _start_step(services: Services, spec: RunCreate) -> int:
    """The step a run starts at: its ``resume_from`` checkpoint's (validated), else 0."""
    if spec.resume_from is None:
        return 0
    source = services.store.get(spec.resume_from.run_id)
    found = find_checkpoint(run_dir(services, source), spec.resume_from.step)
    return found.step if found is not None else 0


@router.post(
    "",
    status_code=201,
    response_model=RunPublic,
    responses={422: {"description": "Invalid spec, with the field and the reason"}},
)
def submit_run(spec: RunCreate, services: ServicesDep) -> RunPublic:
    total_steps = _validate(services, spec)
    run = services.store.create(
        spec.stored(),
        kind=spec.kind,
        name=spec.name or f"{spec.kind}-{spec.env.name}",
        tags=spec.tags,
        notes=spec.notes,
        total_steps=total_steps,
        steps=_start_step(services, spec),  # progress counts from the checkpoint resumed
    )
    return run_public(run)


@router.get("", response_model=RunList)
async def list_runs(
    services: ServicesDep,
    status: RunStatus | None = None,
    kind: Annotated[str | None, Query(max_length=32)] = None,
    tag: Annotated[str | None, Query(max_length=64)] = None,
    q: Annotated[str | None, Query(max_length=200)] = None,
    sweep_id: Annotated[str | None, Query(max_length=32, description="A sweep's trials")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
) -> RunList:
    f = RunFilter(
        status=status.value if status else None,
        kind=kind,
        tag=tag,
        q=q,
        sweep_id=sweep_id,
        limit=limit,
        offset=offset,
    )
    rows, total, seq = await run_in_threadpool(services.store.list_runs_with_seq, f)
    return RunList(items=[run_public(r) for r in rows], total=total, events_seq=seq)


@router.get("/{run_id}", response_model=RunPublic, responses=NOT_FOUND)
def get_run(run: RunDep) -> RunPublic:
    return run_public(run)


@router.patch("/{run_id}", response_model=RunPublic, responses=NOT_FOUND)
def update_run(run: RunDep, update: RunUpdate, services: ServicesDep) -> RunPublic:
    if update.tags is not None and any(not 0 < len(t) <= 64 for t in update.tags):
        raise _invalid(("tags",), "tags must be 1 to 64 characters long")
    updated = services.store.update_meta(
        run.id, name=update.name, tags=update.tags, notes=update.notes
    )
    return run_public(updated)


@router.post("/{run_id}/cancel", status_code=202, response_model=RunPublic, responses=NOT_FOUND)
def cancel_run(run: RunDep, services: ServicesDep) -> RunPublic:
    return run_public(services.store.request_cancel(run.id))


@router.delete(
    "/{run_id}",
    status_code=204,
    response_class=Response,
    responses={**NOT_FOUND, 409: {"model": ErrorPublic, "description": "Not finished"}},
)
def delete_run(run: RunDep, services: ServicesDep) -> Response:
    try:
        services.store.delete(run.id)
    except TransitionError:
        raise HTTPException(
            409,
            f"run {run.id} is {run.status}: only a finished run can be deleted (cancel it first)",
        ) from None
    return Response(status_code=204)
