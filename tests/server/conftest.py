"""A live service per test module (see ``tests/service_harness.py``); ``service_on_each``
is one per database backend (SQLite, then PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import service_env
from tests.service_harness import Service


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = Service(tmp_path_factory.mktemp("service") / "data").start()
    yield svc
    svc.close()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def service_on_each(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    env = service_env(request, request.param)
    svc = Service(tmp_path_factory.mktemp(f"service-{request.param}") / "data", env=env).start()
    yield svc
    svc.close()
