"""A graph network with two action heads over HTTP: its ``actions`` are checked against the
env's heads at submit (a 422 at ``network.actions.<head>``), and it trains on
``TwoArmReach``, whose action is a dict."""

from __future__ import annotations

from typing import Any

from nnx_ppo.presets import two_arm_graph
from tests.service_harness import Service, refused_locs


def two_arm_spec(network: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "ppo",
        "env": {"name": "TwoArmReach"},
        "preset": False,
        "network": network,
        "config": {
            "ppo": {"n_envs": 16, "rollout_length": 10, "total_steps": 1600},
            "eval": {"every_steps": 1600, "n_envs": 8, "max_episode_length": 50},
            "checkpoint_every_steps": 1600,
        },
    }


def test_a_two_head_graph_is_checked_against_the_envs_heads_and_trains(service: Service) -> None:
    missing = two_arm_graph()
    missing["actions"] = {"left": "left", "gripper": "right"}
    refused = service.client.post("/api/runs", json=two_arm_spec(missing))
    assert sorted(refused_locs(refused)) == [
        ["body", "network", "actions", "gripper"],
        ["body", "network", "actions", "right"],
    ]
    by_loc = {tuple(d["loc"]): d["msg"] for d in refused.json()["detail"]}
    assert "no action head 'gripper'" in by_loc[("body", "network", "actions", "gripper")]

    run = service.submit(two_arm_spec(two_arm_graph()))
    done = service.wait_for(run["id"], timeout=600)
    assert done["status"] == "succeeded", done["error"]
    assert "eval/episode_reward" in done["latest_metrics"]
