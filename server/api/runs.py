"""Runs: submit, list, read, edit, cancel, delete."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from server.api.deps import RunDep, Services, ServicesDep, get_services, run_dir
from server.api.envs import worker_variant
from server.schemas import (
    ErrorPublic,
    PresetRef,
    RunCreate,
    RunList,
    RunPublic,
    RunUpdate,
)
from server.spec import preset_fill
from server.spec.checker import CheckerUnavailable
from server.spec.run_checks import RunSpecInvalid, check_run_spec, problem
from server.store.artifacts import find_checkpoint
from server.store.models import RunRow
from server.store.run_status import RunStatus, TransitionError
from server.store.run_store import RunFilter
from server.user_text import PlainText


class _SpecRoute(APIRoute):
    """``POST /api/runs``: when the schema refuses some of a spec's fields, the spec's
    other problems (its config, its references) are checked too, so that one 422 lists
    every problem, not the schema's first."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.name != "submit_run":
            return handler

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as error:
                if not isinstance(error.body, dict):  # raised by the checks, or not JSON
                    raise
                more = await run_in_threadpool(
                    problems_beside_schema, get_services(request), error.body, error.errors()
                )
                raise RequestValidationError([*error.errors(), *more], body=error.body) from None

        return handle


router = APIRouter(prefix="/runs", tags=["runs"], route_class=_SpecRoute)
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorPublic, "description": "Unknown run"}
}


def run_public(run: RunRow) -> RunPublic:
    return RunPublic.model_validate(run, from_attributes=True)


def invalid(loc: tuple[Any, ...], msg: str) -> RequestValidationError:
    """A 422 with one problem, on ``body.<loc>``."""
    return RequestValidationError([problem(loc, msg)])


def with_preset(services: Services, spec: RunCreate) -> RunCreate:
    """``spec`` with the fields it leaves out taken from its env's preset
    (``server.spec.preset_fill``); as it is with ``"preset": false`` or for an env without
    a preset (``preset`` then null). Either way ``env.randomize`` ends up true or false
    (without a preset: false, the library's default)."""
    spec = _preset_filled(services, spec)
    if spec.env.randomize is not None:
        return spec
    return spec.model_copy(update={"env": spec.env.model_copy(update={"randomize": False})})


def _preset_filled(services: Services, spec: RunCreate) -> RunCreate:
    choice = spec.preset
    if choice is False:
        return spec
    variant = choice.variant if isinstance(choice, PresetRef) else None
    if isinstance(choice, PresetRef) and choice.name not in (None, spec.env.name):
        raise invalid(
            ("preset", "name"), f"must be {spec.env.name!r} (the env's own preset) or left out"
        )
    try:
        answer = services.checker.preset(spec.env.name, variant or worker_variant(services))
    except CheckerUnavailable as error:
        raise HTTPException(503, str(error)) from None
    except ValueError:  # no preset for this env (or no such env: the check says so)
        return spec.model_copy(update={"preset": None})
    filled = preset_fill.fill(spec.stored(), spec.network.model_fields_set, answer)
    try:
        return RunCreate.model_validate(filled)
    except ValidationError as error:  # a preset value this schema refuses
        raise RequestValidationError(
            [problem(tuple(e["loc"]), f"{e['msg']} (from the preset)") for e in error.errors()]
        ) from None


def validate(services: Services, spec: RunCreate) -> int:
    """``check_run_spec`` answered as the API answers it: a 422 with every problem (each on
    its field), or a 503 when the checker cannot answer; returns the spec's total steps."""
    try:
        return check_run_spec(
            spec, store=services.store, checker=services.checker, settings=services.settings
        )
    except RunSpecInvalid as error:
        raise RequestValidationError(error.errors) from None
    except CheckerUnavailable as error:
        raise HTTPException(503, str(error)) from None


# Fields without which the rest of a spec cannot be judged: the schema must accept them.
_JUDGED_WITH = frozenset({"kind", "env", "network", "config", "preset"})


def problems_beside_schema(
    services: Services, body: dict[str, Any], schema_errors: Sequence[Any]
) -> list[dict[str, Any]]:
    """The problems of ``body`` that its schema errors hide: the spec without the fields
    the schema refused, checked as a submitted one is (preset, config, references). Empty
    when the refused fields are ones the rest depends on."""
    refused = {e["loc"][1] if len(e["loc"]) > 1 else None for e in schema_errors}
    if None in refused or refused & _JUDGED_WITH:
        return []
    try:
        spec = RunCreate.model_validate({k: v for k, v in body.items() if k not in refused})
        validate(services, with_preset(services, spec))
    except (ValidationError, HTTPException):  # e.g. a distillation spec without its teacher
        return []
    except RequestValidationError as error:
        return [e for e in error.errors() if e["loc"][1] not in refused]
    return []


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
    spec = with_preset(services, spec)
    total_steps = validate(services, spec)
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
    kind: Annotated[PlainText | None, Query(max_length=32)] = None,
    tag: Annotated[PlainText | None, Query(max_length=64)] = None,
    q: Annotated[PlainText | None, Query(max_length=200)] = None,
    sweep_id: Annotated[
        PlainText | None, Query(max_length=32, description="A sweep's trials")
    ] = None,
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
        raise invalid(("tags",), "tags must be 1 to 64 characters long")
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
