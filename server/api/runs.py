"""Runs: submit, list, read, edit, cancel, delete."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from server.api.deps import RUN_ID, RunDep, Services, ServicesDep, get_services, run_dir
from server.api.envs import worker_variant
from server.schemas import (
    CheckpointRef,
    ErrorPublic,
    NetworkSpec,
    PresetRef,
    RunCreate,
    RunList,
    RunPublic,
    RunUpdate,
)
from server.spec import preset_fill
from server.spec.checker import CheckerUnavailable
from server.spec.resources import resource_errors
from server.store.artifacts import find_checkpoint
from server.store.models import RunRow
from server.store.run_status import RunStatus, TransitionError
from server.store.run_store import RunFilter, RunNotFound
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


def _invalid(loc: tuple[Any, ...], msg: str) -> RequestValidationError:
    return RequestValidationError([_problem(loc, msg)])


def _problem(loc: tuple[Any, ...], msg: str) -> dict[str, Any]:
    return {"loc": ["body", *loc], "msg": msg, "type": "value_error"}


def _referenced_run(
    services: Services, ref: CheckpointRef, field: str, errors: list[dict[str, Any]]
) -> RunRow | None:
    """The run a ``teacher``/``resume_from`` names, which must have that checkpoint (None,
    with the problem in ``errors``, when it does not)."""
    try:
        if not RUN_ID.fullmatch(ref.run_id):
            raise RunNotFound(ref.run_id)
        source = services.store.get(ref.run_id)
    except RunNotFound:
        errors.append(_problem((field, "run_id"), f"no run {ref.run_id!r}"))
        return None
    if source.external and not _trainable(source.spec):
        errors.append(
            _problem(
                (field, "run_id"),
                f"run {source.id} is a tracked run whose config is not a run spec (kind, env, "
                "network, config): the service cannot rebuild its networks",
            )
        )
        return None
    if find_checkpoint(run_dir(services, source), ref.step) is None:
        what = "no checkpoint" if ref.step is None else f"no checkpoint at step {ref.step}"
        loc = (field, "step" if ref.step is not None else "run_id")
        errors.append(_problem(loc, f"run {ref.run_id} has {what}"))
        return None
    return source


def _trainable(spec: dict[str, Any]) -> bool:
    """Whether a tracked run's stored config is a run spec the service can build from."""
    env, network = spec.get("env"), spec.get("network")
    return isinstance(env, dict) and isinstance(env.get("name"), str) and isinstance(network, dict)


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
        raise _invalid(
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
            [_problem(tuple(e["loc"]), f"{e['msg']} (from the preset)") for e in error.errors()]
        ) from None


def _validate(services: Services, spec: RunCreate) -> int:
    """Everything about ``spec`` that a schema cannot see, every problem at once (one 422
    entry per problem, each on its field); returns its total steps."""
    errors: list[dict[str, Any]] = []
    teacher_network = None
    resume_checkpoint: str | None = None
    resume_at: tuple[str, int] | None = None  # (run, step) of the checkpoint resumed
    if spec.teacher is not None:
        teacher = _referenced_run(services, spec.teacher, "teacher", errors)
        if teacher is not None and teacher.kind != "ppo":
            errors.append(_problem(("teacher", "run_id"), "a teacher must be a PPO run"))
        elif teacher is not None:
            teacher_network = NetworkSpec(**teacher.spec["network"]).factory_fields()
    if spec.resume_from is not None:
        source = _referenced_run(services, spec.resume_from, "resume_from", errors)
        if source is not None and source.kind != spec.kind:
            errors.append(
                _problem(
                    ("resume_from", "run_id"),
                    f"run {source.id} is a {source.kind} run, this one {spec.kind}",
                )
            )
        elif source is not None and source.spec["env"]["name"] != spec.env.name:
            errors.append(
                _problem(
                    ("env", "name"),
                    f"must be {source.spec['env']['name']!r}, the env of run {source.id}",
                )
            )
        elif source is not None:
            found = find_checkpoint(run_dir(services, source), spec.resume_from.step)
            resume_checkpoint = str(found.path) if found is not None else None
            resume_at = (source.id, found.step) if found is not None else None
    errors += resource_errors(spec.resources, spec.config, services.store.workers())
    try:
        found_errors, total = services.checker.check(
            spec.stored(), teacher_network, resume_checkpoint
        )
    except CheckerUnavailable as error:
        raise HTTPException(503, str(error)) from None
    errors += [e for e in found_errors if e not in errors]
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
        _validate(services, with_preset(services, spec))
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
