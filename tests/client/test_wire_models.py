"""The client's wire models (``nnx_ppo/client/types.py``) against the OpenAPI document the
app serves, as the dashboard's ``check-api`` does for its types: every field of a model is a
property of its schema and back, a field admits None where the server may send null (and only
there, or where it may leave the field out), a field the server may leave out admits None or
has a default, and its type admits what the schema allows. A field the server adds, drops
or changes fails here until the client follows."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

import numpy as np
import pytest

from nnx_ppo.client import types as wire
from nnx_ppo.client.recordings import Recording

# Each client model and the schema it decodes.
MODELS: dict[type, str] = {
    wire.Run: "RunPublic",
    wire.RunList: "RunList",
    wire.Video: "VideoPublic",
    wire.Checkpoint: "CheckpointPublic",
    wire.Env: "EnvPublic",
    wire.Worker: "WorkerPublic",
    wire.Health: "HealthPublic",
    wire.Series: "SeriesPublic",
    wire.Trial: "TrialPublic",
    wire.Sweep: "SweepDetail",
    wire.SweepList: "SweepList",
    Recording: "RecordingDetail",
}
# A `$ref` to one of these is decoded to the client class; any other `$ref` to a dict.
REF_CLASSES: dict[str, type] = {
    "RunPublic": wire.Run,
    "TrialPublic": wire.Trial,
    "WorkerPublic": wire.Worker,
    "SweepPublic": wire.Sweep,
    "VideoPublic": wire.Video,
    "CheckpointPublic": wire.Checkpoint,
}
# Fields that admit None where the schema does not, on purpose.
LENIENT_NONE = {
    # Servers before wall times were recorded sent no `wall_time`; the client still reads them.
    (wire.Series, "wall_time"),
}

Schemas = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def schemas() -> Schemas:
    from server.app import create_app
    from server.settings import Settings

    app = create_app(Settings(api_token="openapi-only-token"), with_worker=False)
    return app.openapi()["components"]["schemas"]


def _alternatives(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The schema's non-null alternatives; a number-or-string (a metric value whose
    non-finite values travel as "NaN", "Infinity") counts as a number, which the client
    decodes."""
    alts = [a for s in schema.get("anyOf", [schema]) for a in _alternatives_of(s)]
    kinds = {a.get("type") for a in alts}
    if kinds == {"number", "string"} and all(set(a) == {"type"} for a in alts):
        return [{"type": "number"}]
    return alts


def _alternatives_of(schema: dict[str, Any]) -> list[dict[str, Any]]:
    if "anyOf" in schema:
        return [a for s in schema["anyOf"] for a in _alternatives_of(s)]
    return [] if schema.get("type") == "null" else [schema]


def _nullable(schema: dict[str, Any]) -> bool:
    return any(s.get("type") == "null" for s in schema.get("anyOf", [schema]))


def _union(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return list(typing.get_args(annotation))
    return [annotation]


def _admits(annotation: Any, schema: dict[str, Any], schemas: Schemas) -> bool:
    """Whether a value of `annotation` (one alternative, not None) holds what `schema` allows."""
    if annotation is Any:
        return True
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        target = schemas[name]
        if "enum" in target:
            return _admits(annotation, {"type": target.get("type", "string")}, schemas)
        if name in REF_CLASSES:
            return annotation is REF_CLASSES[name]
        return typing.get_origin(annotation) is dict or annotation is dict
    origin = typing.get_origin(annotation) or annotation
    args = typing.get_args(annotation)
    kind = schema.get("type")
    if kind == "integer":
        return annotation in (int, float)
    if kind == "number":
        return annotation is float
    if kind == "string":
        return annotation is str
    if kind == "boolean":
        return annotation is bool
    if kind == "array":
        if annotation is np.ndarray:
            return True
        items = schema.get("items")
        return origin is list and (not args or not items or _field_admits(args[0], items, schemas))
    if kind == "object":
        values = schema.get("additionalProperties")
        if origin is not dict:
            return False
        return not args or not isinstance(values, dict) or _field_admits(args[1], values, schemas)
    return False


def _field_admits(annotation: Any, schema: dict[str, Any], schemas: Schemas) -> bool:
    options = [a for a in _union(annotation) if a is not type(None)]
    return all(any(_admits(a, alt, schemas) for a in options) for alt in _alternatives(schema))


def drift(model: type, schema_name: str, schemas: Schemas) -> list[str]:
    """How `model`'s fields differ from the schema's properties (empty: they agree)."""
    schema = schemas[schema_name]
    properties: dict[str, Any] = schema["properties"]
    required = set(schema.get("required", []))
    hints = typing.get_type_hints(model, vars(wire))
    declared = {f.name: f for f in dataclasses.fields(model)}
    fields = set(declared)
    where = f"{model.__name__} ({schema_name})"
    problems = [f"{where}: no field for `{p}`" for p in sorted(properties.keys() - fields)]
    problems += [f"{where}: `{f}` is not in the schema" for f in sorted(fields - properties.keys())]
    for name in sorted(fields & properties.keys()):
        prop = properties[name]
        annotation = hints[name]
        may_be_none = type(None) in _union(annotation)
        has_default = declared[name].default is not dataclasses.MISSING or (
            declared[name].default_factory is not dataclasses.MISSING
        )
        if _nullable(prop) and not may_be_none:
            problems.append(f"{where}: `{name}` does not admit None, the server may send null")
        elif may_be_none and not _nullable(prop) and name in required:
            if (model, name) not in LENIENT_NONE:
                problems.append(f"{where}: `{name}` admits None, the server always sends a value")
        elif name not in required and not (may_be_none or has_default):
            problems.append(f"{where}: `{name}` has no default, the server may leave it out")
        if not _field_admits(annotation, prop, schemas):
            problems.append(f"{where}: `{name}: {annotation}` does not hold the schema's {prop}")
    return problems


@pytest.mark.parametrize("model", list(MODELS), ids=lambda m: m.__name__)
def test_client_model_matches_the_served_schema(model: type, schemas: Schemas) -> None:
    assert drift(model, MODELS[model], schemas) == []


def test_every_sweep_list_field_is_a_sweep_field(schemas: Schemas) -> None:
    """Lists decode `SweepPublic` into the same `Sweep` as the detail."""
    fields = {f.name for f in dataclasses.fields(wire.Sweep)}
    assert set(schemas["SweepPublic"]["properties"]) <= fields


def test_drift_is_found(schemas: Schemas) -> None:
    """The check fails for a model that lost a field, gained one, or has a wrong type or
    optionality."""

    @dataclasses.dataclass(frozen=True)
    class Checkpoint:
        step: str  # the schema's integer
        size_bytes: int | None  # never null
        url: str
        extra: int  # not in the schema; `created_at` is missing

    @dataclasses.dataclass(frozen=True)
    class Health:
        status: str
        version: str
        jax_backend: str  # may be null
        devices: list[int] | None  # a list of strings
        workers: list[dict[str, Any]] | None  # WorkerPublic is decoded to `Worker`
        executor: str | None
        nodes: list[dict[str, Any]]  # may be left out: None or a default needed

    problems = drift(Checkpoint, "CheckpointPublic", schemas)
    assert any("no field for `created_at`" in p for p in problems), problems
    assert any("`extra` is not in the schema" in p for p in problems), problems
    assert any("`step: <class 'str'>` does not hold" in p for p in problems), problems
    assert any("`size_bytes` admits None" in p for p in problems), problems
    assert len(problems) == 4, problems

    problems = drift(Health, "HealthPublic", schemas)
    assert any("`jax_backend` does not admit None" in p for p in problems), problems
    assert any("`devices: list[int] | None` does not hold" in p for p in problems), problems
    assert any("`workers: list[dict[str, typing.Any]] | None` does not" in p for p in problems), (
        problems
    )
    assert any("`nodes` does not admit None" in p for p in problems), problems
    assert len(problems) == 4, problems
