"""The Ray executor against a real two-node Ray cluster on this machine: a head node and a
second node, each with one CPU and its own temp and data directories (``NNX_PPO_NODE_DIR``),
so that a run placed on the second node reaches the API over HTTP only, with its run token.

The cluster and the service are shared by the module's tests (they start real processes);
the last test kills the second node's raylet.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

pytest.importorskip("ray")

from tests.service_harness import (
    JAX_CACHE,
    ROOT,
    Service,
    cartpole_video_spec,
    free_port,
    tiny_ppo_spec,
)

RAY = str(Path(sys.executable).parent / "ray")
NODE_ENV = {
    # Node loss is noticed within about two seconds instead of fifteen.
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "500",
    "RAY_health_check_failure_threshold": "4",
    "JAX_PLATFORMS": "cpu",
    "NNX_PPO_JAX_CACHE": JAX_CACHE,
    "PYTHONPATH": str(ROOT),
}


@dataclass
class Node:
    temp_dir: Path
    data_dir: Path
    group: int
    """The process group of its ``ray start`` (its daemons stay in it)."""

    def raylet(self) -> psutil.Process:
        for process in psutil.process_iter(["cmdline"]):
            cmdline = process.info["cmdline"] or []
            if (
                cmdline
                and cmdline[0].endswith("raylet/raylet")
                and any(str(self.temp_dir) in arg for arg in cmdline)
            ):
                return process
        raise LookupError(f"no raylet with temp dir {self.temp_dir}")


def start_node(base: Path, name: str, args: list[str]) -> Node:
    node = Node(base / f"{name}-tmp", base / f"{name}-data", 0)
    node.temp_dir.mkdir()
    env = {**os.environ, **NODE_ENV, "NNX_PPO_NODE_DIR": str(node.data_dir)}
    command = [
        RAY,
        "start",
        "--num-cpus=1",
        "--object-store-memory=100000000",
        f"--temp-dir={node.temp_dir}",
        "--disable-usage-stats",
        *args,
    ]
    with open(base / f"{name}.log", "ab") as out:
        process = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    node.group = process.pid
    if process.wait(120) != 0:
        raise RuntimeError((base / f"{name}.log").read_text()[-3000:])
    return node


def stop_node(node: Node) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(node.group, signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Node, Node]]:
    base = tmp_path_factory.mktemp("ray")
    port = free_port()
    nodes: list[Node] = []
    try:
        nodes.append(
            start_node(base, "head", ["--head", f"--port={port}", "--include-dashboard=false"])
        )
        nodes.append(start_node(base, "second", [f"--address=127.0.0.1:{port}"]))
        yield f"127.0.0.1:{port}", nodes[0], nodes[1]
    finally:
        for node in nodes:
            stop_node(node)


@pytest.fixture(scope="module")
def service(
    cluster: tuple[str, Node, Node], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    address, _, _ = cluster
    env = {"NNX_PPO_EXECUTOR": "ray", "NNX_PPO_RAY_ADDRESS": address}
    svc = Service(tmp_path_factory.mktemp("ray-service") / "data", env=env).start(timeout=120)
    yield svc
    svc.close()


def node_ids(service: Service, timeout: float = 60) -> tuple[str, str]:
    """The head's and the second node's ids, from ``GET /api/health``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        health = service.client.get("/api/health").json()
        nodes = [n for n in health.get("nodes") or [] if n["alive"]]
        if health.get("executor") == "ray" and len(nodes) == 2:
            head = next(n for n in nodes if n["head"])
            second = next(n for n in nodes if n is not head)
            assert head["total"]["CPU"] == second["total"]["CPU"] == 1
            assert 0 <= second["free"]["CPU"] <= 1
            return head["node_id"], second["node_id"]
        time.sleep(0.5)
    raise TimeoutError(f"health has no two nodes: {health}")


def on_node(spec: dict[str, Any], node_id: str) -> dict[str, Any]:
    return {**spec, "resources": {"cpus": 1, "node": node_id}}


def assert_gapless(events: list[dict[str, Any]]) -> None:
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


def test_remote_run_streams_and_its_artifacts_download(
    service: Service, cluster: tuple[str, Node, Node], tmp_path: Path
) -> None:
    _head, second = node_ids(service)
    run = service.submit(on_node(cartpole_video_spec(), second))
    events = service.events(run["id"], timeout=300)
    finished = service.run(run["id"])
    assert finished["status"] == "succeeded", (finished["error"], service.log())
    assert finished["node"].startswith(second)
    assert_gapless(events)
    steps = [e["step"] for e in events if e["type"] == "metrics"]
    assert steps == sorted(set(steps)) and steps[-1] == 3200
    metrics = service.client.get(f"/api/runs/{run['id']}/metrics").json()
    assert metrics  # the stored series are the streamed ones
    videos = [e["video"] for e in events if e["type"] == "video"]
    assert [v["step"] for v in videos] == [1600, 3200]
    video = service.client.get(videos[-1]["url"])
    assert video.status_code == 200 and video.content[4:8] == b"ftyp"  # an MP4 file
    checkpoints = [e["checkpoint"] for e in events if e["type"] == "checkpoint"]
    assert [c["step"] for c in checkpoints] == [1600, 3200]
    archive = service.client.get(checkpoints[-1]["url"])
    assert archive.status_code == 200
    (tmp_path / "c.tar.gz").write_bytes(archive.content)
    with tarfile.open(tmp_path / "c.tar.gz") as tar:
        assert {m.name.split("/")[0] for m in tar.getmembers()} == {"step_0000003200"}
    # Written by the run process on the second node, in its own data directory; the API
    # holds its own copies.
    _, _, second_node = cluster
    assert (second_node.data_dir / "runs" / run["id"] / "checkpoints").is_dir()
    assert (service.data_dir / "runs" / run["id"] / "checkpoints" / "step_0000003200").is_dir()
    logs = [e["line"] for e in events if e["type"] == "log"]
    assert any(line.startswith("finished in") for line in logs), logs


def test_cancel_of_a_remote_run(service: Service) -> None:
    _head, second = node_ids(service)
    run = service.submit(on_node(tiny_ppo_spec(total_steps=50_000_000), second))
    service.wait_for(run["id"], ["running"], predicate=lambda r: r["steps"] > 0, timeout=180)
    asked = time.monotonic()
    assert service.client.post(f"/api/runs/{run['id']}/cancel").status_code in (200, 202)
    ended = service.wait_for(run["id"], ["cancelled"], timeout=30)
    assert time.monotonic() - asked < 10, "a remote run stops within seconds of its cancel"
    assert ended["node"].startswith(second)


def test_node_loss_requeues_and_resumes_on_the_head(
    service: Service, cluster: tuple[str, Node, Node]
) -> None:
    head, second = node_ids(service)
    total = 240_000
    spec = on_node(tiny_ppo_spec(total_steps=total, checkpoint_every_steps=16_000), second)
    spec["config"]["eval"]["every_steps"] = 80_000
    run = service.submit(spec)
    service.wait_for(
        run["id"],
        ["running"],
        predicate=lambda r: (r["node"] or "").startswith(second) and r["steps"] >= 32_000,
        timeout=180,
    )
    _, _, second_node = cluster
    second_node.raylet().send_signal(signal.SIGKILL)
    done = service.wait_for(run["id"], timeout=240)
    assert done["status"] == "succeeded", (done["error"], service.log())
    assert done["node"].startswith(head) and done["attempts"] == 2
    events = service.events(run["id"], timeout=30)
    assert_gapless(events)
    statuses = [e["status"] for e in events if e["type"] == "status"]
    assert statuses == ["queued", "running", "interrupted", "queued", "running", "succeeded"]
    steps = [e["step"] for e in events if e["type"] == "metrics"]
    assert steps == sorted(set(steps)), "every step once"
    assert steps[-1] == total and len(steps) == total // 160
    resumed = [e["line"] for e in events if e["type"] == "log" and "resuming from" in e["line"]]
    assert len(resumed) == 1 and "(step " in resumed[0]
