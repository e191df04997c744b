"""The checks of a run spec that its schema cannot see, every problem at once: the runs its
``teacher`` and ``resume_from`` name (each with the checkpoint it names), its ``resources``
against the registered workers, and its config, network and env judged by the library
(``SpecChecker``). A sweep checks its base spec and its space's values with the same.

Each problem is a FastAPI-style field error (``{"loc": ["body", ...], "msg", "type"}``), so
that the API answers them as one 422 (``server.api.runs.validate``).
"""

from __future__ import annotations

from typing import Any

from server.schemas import CheckpointRef, NetworkSpec, RunCreate
from server.settings import Settings
from server.spec.checker import SpecChecker
from server.spec.resources import resource_errors
from server.store.artifacts import find_checkpoint
from server.store.models import RunRow
from server.store.run_store import RUN_ID, RunNotFound, RunStore


class RunSpecInvalid(Exception):
    """A run spec's problems (``errors``: field errors, each on its field)."""

    def __init__(self, errors: list[dict[str, Any]]):
        super().__init__(f"{len(errors)} problem(s) in the run spec")
        self.errors = errors


def problem(loc: tuple[Any, ...], msg: str) -> dict[str, Any]:
    """A field error on ``body.<loc>``."""
    return {"loc": ["body", *loc], "msg": msg, "type": "value_error"}


def check_run_spec(
    spec: RunCreate, *, store: RunStore, checker: SpecChecker, settings: Settings
) -> int:
    """Judges everything about ``spec`` that a schema cannot see; returns its total steps.

    Raises:
        RunSpecInvalid: With every problem found, each on its field.
        CheckerUnavailable: If the library's checker cannot answer.
    """
    errors: list[dict[str, Any]] = []
    teacher_network = None
    resume_checkpoint: str | None = None
    resume_at: tuple[str, int] | None = None  # (run, step) of the checkpoint resumed
    if spec.teacher is not None:
        teacher = referenced_run(store, settings, spec.teacher, "teacher", errors)
        if teacher is not None and teacher.kind != "ppo":
            errors.append(problem(("teacher", "run_id"), "a teacher must be a PPO run"))
        elif teacher is not None:
            teacher_network = NetworkSpec(**teacher.spec["network"]).factory_fields()
    if spec.resume_from is not None:
        source = referenced_run(store, settings, spec.resume_from, "resume_from", errors)
        if source is not None and source.kind != spec.kind:
            errors.append(
                problem(
                    ("resume_from", "run_id"),
                    f"run {source.id} is a {source.kind} run, this one {spec.kind}",
                )
            )
        elif source is not None and source.spec["env"]["name"] != spec.env.name:
            errors.append(
                problem(
                    ("env", "name"),
                    f"must be {source.spec['env']['name']!r}, the env of run {source.id}",
                )
            )
        elif source is not None:
            found = find_checkpoint(settings.run_dir(source.id), spec.resume_from.step)
            resume_checkpoint = str(found.path) if found is not None else None
            resume_at = (source.id, found.step) if found is not None else None
    errors += resource_errors(spec.resources, spec.config, store.workers())
    found_errors, total = checker.check(spec.stored(), teacher_network, resume_checkpoint)
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
        raise RunSpecInvalid(errors)
    return total


def referenced_run(
    store: RunStore,
    settings: Settings,
    ref: CheckpointRef,
    field: str,
    errors: list[dict[str, Any]],
) -> RunRow | None:
    """The run a ``teacher``/``resume_from`` names, which must have that checkpoint (None,
    with the problem in ``errors``, when it does not)."""
    try:
        if not RUN_ID.fullmatch(ref.run_id):
            raise RunNotFound(ref.run_id)
        source = store.get(ref.run_id)
    except RunNotFound:
        errors.append(problem((field, "run_id"), f"no run {ref.run_id!r}"))
        return None
    if source.external and not _trainable(source.spec):
        errors.append(
            problem(
                (field, "run_id"),
                f"run {source.id} is a tracked run whose config is not a run spec (kind, env, "
                "network, config): the service cannot rebuild its networks",
            )
        )
        return None
    if find_checkpoint(settings.run_dir(source.id), ref.step) is None:
        what = "no checkpoint" if ref.step is None else f"no checkpoint at step {ref.step}"
        loc = (field, "step" if ref.step is not None else "run_id")
        errors.append(problem(loc, f"run {ref.run_id} has {what}"))
        return None
    return source


def _trainable(spec: dict[str, Any]) -> bool:
    """Whether a tracked run's stored config is a run spec the service can build from."""
    env, network = spec.get("env"), spec.get("network")
    return isinstance(env, dict) and isinstance(env.get("name"), str) and isinstance(network, dict)
