"""A live service per test module (see ``tests/service_harness.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.service_harness import Service


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = Service(tmp_path_factory.mktemp("service") / "data").start()
    yield svc
    svc.close()
