"""Sweeps against a real service with real worker processes: eight PointReach trials with a
median pruner, a service killed mid-sweep and started again on the same data, the sweep's
stream, and the 422s that name the field or the space's path."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.sync.client import connect

from tests.service_harness import TOKEN, Service, tiny_ppo_spec

WORKERS = ["--workers", "2"]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Service]]:
    """The module's service; a test that restarts it puts the new one here."""
    holder = {"service": Service(tmp_path_factory.mktemp("sweeps") / "data", args=WORKERS)}
    holder["service"].start()
    yield holder
    holder["service"].close()


def sweep_body(**fields: Any) -> dict[str, Any]:
    spec = tiny_ppo_spec(total_steps=12_000)
    spec["config"]["eval"]["every_steps"] = 1200
    spec["config"]["checkpoint_every_steps"] = 2400
    return {
        "spec": spec,
        "space": {
            "config.seed": {"int_uniform": [0, 10_000]},
            "config.ppo.learning_rate": {"choice": [1e-3, 1e-6]},
        },
        **fields,
    }


def sweep(service: Service, sweep_id: str) -> dict[str, Any]:
    response = service.client.get(f"/api/sweeps/{sweep_id}")
    assert response.status_code == 200, response.text
    return response.json()


def wait_sweep(service: Service, sweep_id: str, until: Any, timeout: float = 420) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = sweep(service, sweep_id)
        if until(current):
            return current
        time.sleep(0.3)
    raise TimeoutError(f"sweep {sweep_id}: {sweep(service, sweep_id)}\n{service.log()}")


def stream(service: Service, sweep_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
    url = f"ws://127.0.0.1:{service.port}/api/sweeps/{sweep_id}/stream?after_seq={after_seq}"
    out = []
    with connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        for message in ws:  # until the server closes it after the final status
            out.append(json.loads(message))
        assert ws.close_code == 1000
    return out


def test_eight_trials_with_a_pruner_survive_a_restart(live: dict[str, Service]) -> None:
    service = live["service"]
    body = sweep_body(
        method="random",
        max_trials=8,
        parallel=2,
        pruner={"kind": "median", "startup_trials": 1},
    )
    # the first spec checks start the checker process: slow on a loaded machine
    created = service.client.post("/api/sweeps", json=body, timeout=180)
    assert created.status_code == 201, created.text
    sweep_id = created.json()["id"]
    ended = ("succeeded", "pruned", "failed", "cancelled")

    def ended_trials(s: dict[str, Any]) -> int:
        return sum(n for status, n in s["trial_counts"].items() if status in ended)

    wait_sweep(service, sweep_id, lambda s: ended_trials(s) >= 3)
    service.close()  # SIGKILL: API, driver, supervisor and the running trials, all at once
    service = live["service"] = Service(service.data_dir, args=WORKERS).start()
    done = wait_sweep(service, sweep_id, lambda s: s["status"] != "running")

    assert done["status"] == "finished", done
    trials = done["trials"]
    assert [t["trial"] for t in trials] == list(range(8))  # none lost, none twice
    listed = service.client.get("/api/runs", params={"sweep_id": sweep_id}).json()
    assert listed["total"] == 8
    assert sorted(r["id"] for r in listed["items"]) == sorted(t["run_id"] for t in trials)
    assert {t["status"] for t in trials} <= {"succeeded", "pruned"}, trials
    pruned = [t for t in trials if t["status"] == "pruned"]
    assert pruned, trials
    for trial in pruned:  # stopped before the budget, after a final checkpoint, saying why
        assert trial["steps"] < trial["total_steps"] == 12_000
        assert trial["error"].startswith("pruned by the sweep's median pruner at step")
        checkpoints = service.client.get(f"/api/runs/{trial['run_id']}/checkpoints").json()
        assert max(c["step"] for c in checkpoints["items"]) == trial["steps"]
    succeeded = [t for t in trials if t["status"] == "succeeded"]
    best = max(succeeded, key=lambda t: t["objective"])
    assert done["best"]["run_id"] == best["run_id"]
    run = service.run(best["run_id"])  # the objective is the final deterministic eval
    assert run["latest_metrics"]["eval/episode_reward"] == best["objective"]
    assert run["trial_params"] == best["params"] == done["best"]["params"]
    assert run["spec"]["config"]["seed"] == best["params"]["config.seed"]

    events = stream(service, sweep_id)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["status"] == "running" and events[-1]["status"] == "finished"
    told = {(e["trial"], e["status"]) for e in events if e["type"] == "trial"}
    assert {(t["trial"], t["status"]) for t in trials} <= told
    bests = [e for e in events if e["type"] == "best"]
    assert bests[-1]["run_id"] == best["run_id"]
    assert stream(service, sweep_id, after_seq=len(events) - 2) == events[-2:]


def _loc(response: Any) -> list[Any]:
    assert response.status_code == 422, response.text
    return response.json()["detail"][0]["loc"]


def test_invalid_sweeps_are_422s_naming_the_path(live: dict[str, Service]) -> None:
    client = live["service"].client
    post = lambda body: client.post("/api/sweeps", json=body)  # noqa: E731
    # a path that is not one a space may name
    assert _loc(post(sweep_body(space={"spec.nothing": {"uniform": [0, 1]}}))) == [
        "body",
        "space",
    ]
    # a path that does not exist in the run spec (checked with the runs' own checks)
    bad_field = post(sweep_body(space={"config.ppo.no_such_field": {"uniform": [0, 1]}}))
    assert _loc(bad_field) == ["body", "space", "config.ppo.no_such_field"]
    # a value the space can give that makes an invalid spec: a negative learning rate
    negative = post(sweep_body(space={"config.ppo.learning_rate": {"uniform": [-1, 1e-3]}}))
    assert _loc(negative) == ["body", "space", "config.ppo.learning_rate"]
    assert "learning_rate" in negative.json()["detail"][0]["msg"]
    # a choice that is not a valid network
    sizes = post(sweep_body(space={"network.actor_hidden_sizes": {"choice": [[16], "wide"]}}))
    assert _loc(sizes) == ["body", "space", "network.actor_hidden_sizes"]
    # an invalid base spec names its field under spec
    base = sweep_body()
    base["spec"]["config"]["ppo"]["n_envs"] = 0
    assert _loc(post(base))[:2] == ["body", "spec"]
    # ranges, methods and sizes
    assert _loc(post(sweep_body(space={"config.seed": {"int_uniform": [5, 1]}})))[:3] == [
        "body",
        "space",
        "config.seed",
    ]
    grid = sweep_body(method="grid")
    assert _loc(post(grid)) == ["body"]  # a continuous dimension in a grid
    too_many = sweep_body(method="grid", space={"config.seed": {"grid": [1, 2]}}, max_trials=3)
    assert _loc(post(too_many)) == ["body", "max_trials"]
    assert _loc(post(sweep_body(parallel=0))) == ["body", "parallel"]
    assert _loc(post(sweep_body(pruner="sometimes"))) == ["body", "pruner", "kind"]
    assert _loc(post(sweep_body(objective={"mode": "up"}))) == ["body", "objective", "mode"]
    # nothing was queued by any of them
    assert client.get("/api/sweeps").json()["total"] <= 1
    assert client.get("/api/sweeps/s000000000ff").status_code == 404
    assert client.get("/api/sweeps/not-an-id").status_code == 404
