"""The service-wide events websocket (``WS /api/events``) against a real service with a
real worker: gapless seqs, resume after N replays exactly the tail, live events equal to
their replay, and created/status/progress/updated/deleted for one run's whole life."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.service_harness import TOKEN, Service, tiny_ppo_spec


def _connect(service: Service, after_seq: int, **kwargs: Any) -> ClientConnection:
    return connect(
        f"ws://127.0.0.1:{service.port}/api/events?after_seq={after_seq}",
        additional_headers={"Authorization": f"Bearer {TOKEN}"},
        open_timeout=30,
        close_timeout=5,
        **kwargs,
    )


def _read(ws: ClientConnection, idle: float = 1.5) -> list[dict[str, Any]]:
    """Events until none comes for ``idle`` seconds (the stream itself never ends)."""
    out = []
    while True:
        try:
            out.append(json.loads(ws.recv(timeout=idle)))
        except TimeoutError:
            return out


def _events(service: Service, after_seq: int) -> list[dict[str, Any]]:
    with _connect(service, after_seq) as ws:
        return _read(ws)


@pytest.fixture(scope="module")
def history(service: Service) -> dict[str, Any]:
    """One run's whole life: submitted, trained, renamed and tagged, deleted."""
    spec = {**tiny_ppo_spec(total_steps=8000), "name": "events-run"}
    run = service.submit(spec)
    service.wait_for(run["id"], ["succeeded"])
    patched = service.client.patch(
        f"/api/runs/{run['id']}", json={"name": "events-renamed", "tags": ["a", "b"]}
    )
    assert patched.status_code == 200, patched.text
    assert service.client.delete(f"/api/runs/{run['id']}").status_code == 204
    return {"run": run, "events": _events(service, 0)}


def test_seqs_are_gapless_and_a_runs_life_is_told(history: dict[str, Any]) -> None:
    events, run_id = history["events"], history["run"]["id"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    mine = [e for e in events if e["run_id"] == run_id]
    types = [e["type"] for e in mine]
    assert types[0] == "created" and types[-2:] == ["updated", "deleted"]
    created = mine[0]["run"]
    assert created["id"] == run_id and created["name"] == "events-run"
    assert created["status"] == "queued"
    statuses = [e["status"] for e in mine if e["type"] == "status"]
    assert statuses == ["running", "succeeded"]
    final = next(e for e in mine if e["type"] == "status" and e["status"] == "succeeded")
    assert final["steps"] >= 8000 and final["error"] is None
    assert any(k.startswith("eval/") for k in final["latest_metrics"])
    progress = [e for e in mine if e["type"] == "progress"]
    assert progress and all(e["total_steps"] == created["total_steps"] for e in progress)
    steps = [e["steps"] for e in progress]
    assert steps == sorted(steps) and steps[0] > 0
    gaps = [b["time"] - a["time"] for a, b in itertools.pairwise(progress)]
    assert all(gap >= 0.9 for gap in gaps), gaps  # throttled: one a second at most
    updated = mine[-2]
    assert (updated["name"], updated["tags"]) == ("events-renamed", ["a", "b"])
    assert updated["notes"] == ""
    assert set(mine[-1]) == {"seq", "type", "run_id", "time"}


def test_resume_after_n_replays_exactly_the_tail(service: Service, history: dict[str, Any]) -> None:
    events = history["events"]
    for n in (0, 1, len(events) // 2, len(events) - 1, len(events)):
        assert _events(service, n) == events[n:]


def test_live_events_equal_their_replay_and_lists_give_the_seq(
    service: Service, history: dict[str, Any]
) -> None:
    listing = service.client.get("/api/runs").json()
    head = listing["events_seq"]
    assert head == history["events"][-1]["seq"]  # nothing has changed since
    spec = {**tiny_ppo_spec(total_steps=50_000_000), "name": "events-live"}
    with _connect(service, head) as ws:
        run = service.submit(spec)
        live = [json.loads(ws.recv(timeout=30))]
        assert live[0]["type"] == "created" and live[0]["run"]["id"] == run["id"]
        service.client.patch(f"/api/runs/{run['id']}", json={"notes": "hello"})
        assert service.client.post(f"/api/runs/{run['id']}/cancel").status_code == 202
        service.wait_for(run["id"], ["cancelled"])
        time.sleep(0.5)
        live += _read(ws)
    assert [e["seq"] for e in live] == list(range(head + 1, head + 1 + len(live)))
    assert {"created", "updated", "status"} <= {e["type"] for e in live}
    assert next(e for e in live if e["type"] == "updated")["notes"] == "hello"
    assert _events(service, head) == live


def test_bad_seqs_and_access(service: Service) -> None:
    head = service.client.get("/api/runs").json()["events_seq"]
    with _connect(service, head + 1000) as ws, pytest.raises(ConnectionClosed):
        ws.recv(timeout=10)
    assert ws.close_code == 4410  # a seq this service never reached: list again
    with _connect(service, -1) as ws, pytest.raises(ConnectionClosed):
        ws.recv(timeout=10)
    assert ws.close_code == 1008
    url = f"ws://127.0.0.1:{service.port}/api/events"
    with pytest.raises(InvalidStatus) as no_token:
        connect(url, open_timeout=10)
    assert no_token.value.response.status_code == 401
    with pytest.raises(InvalidStatus) as foreign:
        _connect(service, 0, origin="http://evil.example")
    assert foreign.value.response.status_code == 403
