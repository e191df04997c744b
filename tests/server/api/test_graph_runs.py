"""``network.kind: "graph"`` over HTTP: a population graph described in JSON is checked at
submit (every mistake a 422 entry whose ``loc`` points into the graph), trains, resumes from
its checkpoint and teaches a graph student."""

from __future__ import annotations

import copy
from typing import Any

from tests.networks.test_graph_spec import DESCRIPTION
from tests.service_harness import Service, refused_locs


def graph_spec(total_steps: int, network: dict[str, Any] | None = None) -> dict[str, Any]:
    """A PointReachDict run of the issue's example graph (16 hidden units), small enough to
    compile and train in seconds."""
    return {
        "kind": "ppo",
        "env": {"name": "PointReachDict"},
        "preset": False,
        "network": network or DESCRIPTION,
        "config": {
            "ppo": {"n_envs": 16, "rollout_length": 10, "total_steps": total_steps},
            "eval": {"every_steps": 2000, "n_envs": 8, "max_episode_length": 50},
            "checkpoint_every_steps": 2000,
        },
    }


def test_a_graphs_mistakes_are_refused_where_they_are(service: Service) -> None:
    bad = copy.deepcopy(DESCRIPTION)
    bad["populations"][0]["size"] = 5  # obs["state"] has 4 features
    bad["connections"][2]["delay"] = 0  # hidden -> hidden: a zero-delay cycle
    bad["connections"][3]["dst"] = "nope"
    refused = service.client.post("/api/runs", json=graph_spec(4000, bad))
    assert sorted(refused_locs(refused)) == [
        ["body", "network", "connections", 2, "delay"],
        ["body", "network", "connections", 3, "dst"],
        ["body", "network", "populations", 0, "size"],
    ]
    by_loc = {tuple(d["loc"]): d["msg"] for d in refused.json()["detail"]}
    assert "'hidden' -> 'hidden'" in by_loc[("body", "network", "connections", 2, "delay")]
    # A shape the schema refuses has its place too; other kinds refuse the graph's fields.
    negative = copy.deepcopy(DESCRIPTION)
    negative["connections"][1]["delay"] = -1
    refused = service.client.post("/api/runs", json=graph_spec(4000, negative))
    assert ["body", "network", "connections", 1, "delay"] in refused_locs(refused)
    mlp_with_graph = {"kind": "mlp", "actions": {"arm": "arm"}}
    refused = service.client.post("/api/runs", json=graph_spec(4000, mlp_with_graph))
    assert "only for kind 'graph'" in refused.json()["detail"][0]["msg"]


def test_a_graph_run_trains_resumes_and_teaches(service: Service) -> None:
    run = service.submit(graph_spec(4000))
    assert run["spec"]["network"]["populations"][2] == {
        "name": "hidden",
        "size": 16,
        "activation": "swish",
    }
    done = service.wait_for(run["id"], timeout=600)
    assert done["status"] == "succeeded", done["error"]
    assert "eval/episode_reward" in done["latest_metrics"]
    policy_url = f"/api/runs/{run['id']}/checkpoints/4000/policy"
    assert service.client.get(policy_url, params={"format": "stablehlo"}).status_code == 200
    onnx = service.client.get(policy_url, params={"format": "onnx"})
    assert onnx.status_code == 422 and "stablehlo" in onnx.json()["detail"], onnx.text

    resumed = service.submit(
        {**graph_spec(6400), "resume_from": {"run_id": run["id"], "step": 4000}}
    )
    assert resumed["steps"] == 4000
    done = service.wait_for(resumed["id"], timeout=600)
    assert done["status"] == "succeeded", done["error"]
    steps = [e["step"] for e in service.events(resumed["id"]) if e["type"] == "metrics"]
    assert steps[0] > 4000 and steps[-1] == 6400

    wider = copy.deepcopy(DESCRIPTION)
    wider["populations"][2]["size"] = 8
    student = service.submit(
        {
            "kind": "distillation",
            "env": {"name": "PointReachDict"},
            "network": wider,
            "teacher": {"run_id": run["id"], "step": None},
            "config": {
                "distillation": {"n_envs": 16, "rollout_length": 10, "total_steps": 2000},
                "eval": {"every_steps": 2000, "n_envs": 8, "max_episode_length": 50},
            },
        }
    )
    done = service.wait_for(student["id"], timeout=600)
    assert done["status"] == "succeeded", done["error"]
    assert "losses/distillation" in done["latest_metrics"]
