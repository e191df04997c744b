"""Load: two runs train at once (``--workers 2``; this machine has two cores) while 100
websocket clients follow them and four clients poll the API. No "database is locked", no
lost or duplicated event (each client sees 1..N in order, then the close), and the API's
p99 latency goes into the summary. ``bench/reliability_load.py`` is the longer version."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reliability.helpers import ReliableService, database_problems
from tests.reliability.load import drive
from tests.service_harness import tiny_ppo_spec

pytestmark = pytest.mark.category("load")

CLIENTS = 100
P99_LIMIT_S = 2.0
"""Generous: an API on a 2-core machine that is also training two runs."""


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReliableService]:
    service = ReliableService(
        tmp_path_factory.mktemp("load") / "data", args=["--workers", "2"]
    ).start()
    yield service
    service.close()


def test_concurrent_runs_with_100_followers_and_pollers(
    svc: ReliableService, figures: dict
) -> None:
    runs = [
        svc.submit({**tiny_ppo_spec(4800, checkpoint_every_steps=1600), "name": f"load-{i}"})
        for i in range(2)
    ]
    ids = [r["id"] for r in runs]
    result = drive(svc, ids, CLIENTS)
    figures.update({f"load: {k}": v for k, v in result.figures().items()})

    finished = {run_id: svc.run(run_id) for run_id in ids}
    for run in finished.values():
        assert run["status"] == "succeeded" and run["error"] is None, run
    last_seq = {run_id: len(svc.stored_events(run_id)) for run_id in ids}
    for follower in result.followers:
        assert follower.error is None, follower.error
        assert follower.seqs == list(range(1, last_seq[follower.run_id] + 1)), follower.run_id
        assert follower.last is not None and follower.last["status"] == "succeeded"
        assert follower.close_code == 1000
    assert result.errors == []
    assert "database is locked" not in svc.output.read_text()
    for run_id in ids:
        log = svc.client.get(f"/api/runs/{run_id}/logs").text
        assert "database is locked" not in log
    assert database_problems(svc.db_url) == []
    assert result.p(0.99) < P99_LIMIT_S, result.figures()
