"""One live service for the client's tests (the API and CLI tests share it and one finished
PointReach run; each service start and each run costs seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.service_harness import Service, tiny_ppo_spec


@pytest.fixture(scope="package")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = Service(tmp_path_factory.mktemp("client-service") / "data").start()
    yield svc
    svc.close()


@pytest.fixture(scope="package")
def finished_run(service: Service) -> dict[str, Any]:
    """A PointReach run of 8000 steps (two evals, two checkpoints), finished."""
    run = service.submit({**tiny_ppo_spec(total_steps=8000), "name": "client-finished"})
    done = service.wait_for(run["id"])
    assert done["status"] == "succeeded", done
    return done
