"""Property-based fuzzing of every operation of the live server's OpenAPI document with
schemathesis: valid and invalid requests (path, query and body), with the token. No
answer is a 5xx, and every error is JSON with a ``detail``."""

from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.generation import GenerationMode

from tests.reliability.conftest import Generated
from tests.reliability.helpers import ReliableService
from tests.service_harness import TOKEN

pytestmark = pytest.mark.category("bad_input")

EXAMPLES = 25
"""Generated requests per operation and mode (valid, invalid)."""


def _operations(api: ReliableService) -> list:  # type: ignore[type-arg]
    raw = api.client.get("/api/openapi.json").json()
    schema = schemathesis.openapi.from_dict(raw)
    return [result.ok() for result in schema.get_all_operations()]


def _label(operation) -> str:  # type: ignore[no-untyped-def]
    return f"{operation.method.upper()} {operation.path}"


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_5xx_and_json_errors_on_every_operation(
    api: ReliableService, generated_cases: Generated, mode: GenerationMode
) -> None:
    # A queued run, so that generated ids sometimes hit a real one.
    from tests.service_harness import tiny_ppo_spec

    real = api.submit(tiny_ppo_spec())["id"]
    operations = _operations(api)
    assert len(operations) >= 15, [_label(o) for o in operations]
    problems: list[str] = []
    for operation in operations:
        strategy = operation.as_strategy(generation_mode=mode)
        if "{run_id}" in operation.path:
            strategy = st.one_of(
                strategy,
                operation.as_strategy(generation_mode=mode, path_parameters={"run_id": real}),
            )

        _fuzz(api, operation, strategy, mode, generated_cases, problems)
    assert problems == [], "\n".join(problems[:20])


def _fuzz(  # type: ignore[no-untyped-def]
    api: ReliableService,
    operation,
    strategy,
    mode: GenerationMode,
    generated_cases: Generated,
    problems: list[str],
) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def check(case) -> None:  # type: ignore[no-untyped-def]
        response = case.call(
            base_url=api.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
        )
        held = response.status_code < 500
        problem = None if held else f"{response.status_code}"
        if held and response.status_code >= 400:
            try:
                body = response.json()
                held = isinstance(body, dict) and bool(body.get("detail"))
            except json.JSONDecodeError:
                held = False
            problem = None if held else f"{response.status_code} without a JSON detail"
        generated_cases.record(held)
        if problem:
            problems.append(f"{_label(operation)}: {problem}: {case!r}"[:500])

    try:
        check()
    except Unsatisfiable:  # nothing to get wrong here (e.g. no parameters to break)
        assert mode is GenerationMode.NEGATIVE, _label(operation)
