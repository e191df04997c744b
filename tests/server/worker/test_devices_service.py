"""Devices through a real service: a worker with two host devices, each shared by up to
two runs. Runs asking for one device each get distinct ones, a run asking for two gets
both (and JAX in its process sees two), more than the worker has is a 422; every run
process receives the environment that places it."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator

import pytest

from tests.service_harness import Service, tiny_ppo_spec

PLACEMENT = re.compile(r"placement: devices (\S+); JAX sees (\d+) device\(s\); (.*)")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    data = tmp_path_factory.mktemp("devices") / "data"
    svc = Service(
        data,
        args=["--workers", "2", "--runs-per-device", "2"],
        env={"NNX_PPO_SYSTEM_METRICS_SECONDS": "0.5"},
    ).start()
    yield svc
    svc.close()


def _spec(gpus: int) -> dict:  # type: ignore[type-arg]
    return {**tiny_ppo_spec(total_steps=4000), "resources": {"gpus": gpus}}


def _placement(service: Service, run_id: str) -> tuple[list[str], int, dict[str, str]]:
    logs = service.client.get(f"/api/runs/{run_id}/logs").text
    found = PLACEMENT.search(logs)
    assert found is not None, logs
    env = dict(item.split("=", 1) for item in found[3].split(" ") if "=" in item)
    return found[1].split(","), int(found[2]), env


def test_more_devices_than_any_worker_has_is_a_422(service: Service) -> None:
    response = service.client.post("/api/runs", json=_spec(3))
    assert response.status_code == 422, response.text
    (detail,) = response.json()["detail"]
    assert detail["loc"] == ["body", "resources", "gpus"]
    assert "the most any worker has is 2" in detail["msg"] and "cpu:0, cpu:1" in detail["msg"]
    for bad in (0, "2", 1.5):
        response = service.client.post("/api/runs", json=_spec(bad))  # type: ignore[arg-type]
        assert response.status_code == 422 and response.json()["detail"][0]["loc"][:3] == [
            "body",
            "resources",
            "gpus",
        ]


def _holders(service: Service) -> dict[str, list[str]]:
    (worker,) = service.client.get("/api/health").json()["workers"]
    return {use["device"]: use["runs"] for use in worker["device_use"]}


def test_runs_get_their_devices_through_their_environment(service: Service) -> None:
    one_a, one_b, two = (service.submit(_spec(n))["id"] for n in (1, 1, 2))
    # While the run asking for two devices runs, health shows it on both.
    service.wait_for(two, ["running"], timeout=120)
    deadline = time.monotonic() + 10
    while two not in _holders(service).get("cpu:1", []) and time.monotonic() < deadline:
        time.sleep(0.2)
    holders = _holders(service)
    assert set(holders) == {"cpu:0", "cpu:1"}
    assert two in holders["cpu:0"] and two in holders["cpu:1"], holders
    for run_id in (one_a, one_b, two):
        assert service.wait_for(run_id)["status"] == "succeeded"
    (device_a,), count_a, env_a = _placement(service, one_a)
    (device_b,), count_b, env_b = _placement(service, one_b)
    assert {device_a, device_b} == {"cpu:0", "cpu:1"} and count_a == count_b == 1
    devices, count, env = _placement(service, two)
    assert devices == ["cpu:0", "cpu:1"] and count == 2
    # Run processes yield the CPU to the API (settings.run_niceness, 10 by default).
    logs = service.client.get(f"/api/runs/{two}/logs").text
    assert f"priority: niceness {min(19, os.nice(0) + 10)}" in logs, logs
    assert "--xla_force_host_platform_device_count=2" in env["XLA_FLAGS"]
    assert "XLA_FLAGS" not in env_a or "device_count=2" not in env_a["XLA_FLAGS"]
    for placed in (env_a, env_b, env):  # two runs per device: no preallocation
        assert placed["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"

    # Each run process sampled itself: system/* metrics are in its stream, at its steps.
    events = service.events(one_a)
    system = [e for e in events if e["type"] == "metrics" and "system/rss_bytes" in e["values"]]
    assert system, [e["values"].keys() for e in events if e["type"] == "metrics"]
    values = system[-1]["values"]
    assert values["system/rss_bytes"] > 50e6  # a process with JAX loaded
    assert values["system/host_memory_available_bytes"] > 0
    assert values["system/cpu_percent"] >= 0
    assert "losses/total" in values  # stored with that step's training metrics
    assert not any(key.startswith("system/gpu") for key in values)  # no GPU here
