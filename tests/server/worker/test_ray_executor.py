"""The Ray executor against a real two-node Ray cluster on this machine: a head node and a
second node, each with one CPU and its own temp and data directories (``NNX_PPO_NODE_DIR``),
so that a run placed on the second node reaches the API over HTTP only, with its run token.

The cluster and the service are shared by the module's tests (they start real processes);
the last test kills the second node's raylet.
"""

from __future__ import annotations

import signal
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

from tests.ray_cluster import Node, two_node_cluster
from tests.service_harness import JAX_CACHE, Service, cartpole_video_spec, tiny_ppo_spec


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Node, Node]]:
    with two_node_cluster(tmp_path_factory.mktemp("ray"), JAX_CACHE) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def service(
    cluster: tuple[str, Node, Node], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """``nnx-ppo serve`` with the Ray executor: the API and its supervisor (the driver)."""
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
    # The run process's whole output file, uploaded from its node at the end.
    assert "finished in" in service.client.get(f"/api/runs/{run['id']}/logs").text


def test_cancel_of_a_remote_run(service: Service) -> None:
    _head, second = node_ids(service)
    run = service.submit(on_node(tiny_ppo_spec(total_steps=50_000_000), second))
    service.wait_for(run["id"], ["running"], predicate=lambda r: r["steps"] > 0, timeout=180)
    asked = time.monotonic()
    assert service.client.post(f"/api/runs/{run['id']}/cancel").status_code in (200, 202)
    ended = service.wait_for(run["id"], ["cancelled"], timeout=30)
    assert time.monotonic() - asked < 10, "a remote run stops within seconds of its cancel"
    assert ended["node"].startswith(second)


def test_the_api_restarts_under_a_remote_run_which_goes_on(service: Service) -> None:
    _head, second = node_ids(service)
    total = 160_000
    run = service.submit(on_node(tiny_ppo_spec(total_steps=total), second))
    service.wait_for(run["id"], ["running"], predicate=lambda r: r["steps"] > 0, timeout=180)
    service.kill()  # SIGKILL of the API and its supervisor: the detached actor goes on
    time.sleep(3)
    restarted = Service(service.data_dir, env=service.extra_env, port=service.port).start()
    service.process = restarted.process  # the module's fixture stops it
    restarted.client.close()
    done = service.wait_for(run["id"], timeout=240)
    assert done["status"] == "succeeded", (done["error"], service.log())
    assert done["attempts"] == 1, "adopted by the new supervisor, not requeued"
    events = service.events(run["id"], timeout=30)
    assert_gapless(events)
    steps = [e["step"] for e in events if e["type"] == "metrics"]
    assert steps == sorted(set(steps)) and len(steps) == total // 160, "nothing lost or doubled"


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
    resumed = [e for e in events if e["type"] == "log" and "resuming from" in e["line"]]
    assert len(resumed) == 1 and "(step " in resumed[0]["line"]
    checkpoint = int(resumed[0]["line"].split("(step ")[1].split(")")[0])
    # The steps the lost node stored past that checkpoint were rewound and trained again:
    # read as a follower reads the stream (a rewind drops the points after its step), and as
    # stored, every step is there once. The lost node's process can still store a chunk's
    # metrics after the run restarted elsewhere, up to the resumed process's first report
    # (the line above, then its rewind).
    lost = max(e["step"] for e in events if e["type"] == "metrics" and e["seq"] < resumed[0]["seq"])
    rewinds = [(e["step"], e["from_step"]) for e in events if e["type"] == "rewind"]
    if lost > checkpoint:
        assert len(rewinds) == 1 and rewinds[0][0] == checkpoint and rewinds[0][1] >= lost
    else:
        assert rewinds == []
    followed: list[int] = []
    for event in events:
        if event["type"] == "rewind":
            followed = [step for step in followed if step <= event["step"]]
        elif event["type"] == "metrics":
            followed.append(event["step"])
    assert followed == list(range(160, total + 1, 160)), "every step once"
    csv = service.client.get(f"/api/runs/{run['id']}/metrics.csv").text.splitlines()[1:]
    stored = [(int(row.split(",")[0]), row.split(",")[2]) for row in csv]
    assert len(set(stored)) == len(stored)
    assert sorted({step for step, _ in stored}) == followed
