"""Resume and distillation through the API, on SQLite (the backend does not change what
they do; ``test_runs.py`` covers the run API on both backends): a run resumed from another
run's checkpoint continues from its step (its progress starts there), checkpoints that do
not fit and totals that do not exceed the checkpoint's step are refused at submit with the
field that is wrong, a student is distilled from a finished teacher, and a MuJoCo Playground
run resumes past its next checkpoint."""

from __future__ import annotations

import pytest

from tests.service_harness import Service, refused_locs, tiny_cartpole_spec, tiny_ppo_spec

_locs = refused_locs


def test_resume_and_distill_from_checkpoints(service: Service) -> None:
    teacher = service.submit(tiny_ppo_spec(total_steps=8000))
    service.wait_for(teacher["id"])
    resumed = service.submit(
        {
            **tiny_ppo_spec(total_steps=12_000),
            "resume_from": {"run_id": teacher["id"], "step": 4000},
        }
    )
    assert resumed["steps"] == 4000 and resumed["total_steps"] == 12_000  # progress from 4000
    events = service.events(resumed["id"])
    steps = [e["step"] for e in events if e["type"] == "metrics"]
    assert steps[0] == 4160 and steps[-1] == 12_000  # continued from step 4000
    assert service.run(resumed["id"])["status"] == "succeeded"

    bad_network = {
        **tiny_ppo_spec(),
        "resume_from": {"run_id": teacher["id"]},
        "network": {"kind": "mlp", "actor_hidden_sizes": [8]},
    }
    refused = service.client.post("/api/runs", json=bad_network)
    assert _locs(refused) == [["body", "network"]]  # the checkpoint's layout, named
    assert "does not fit the checkpoint" in refused.json()["detail"][0]["msg"]
    assert "kernel" in refused.json()["detail"][0]["msg"]
    other_envs = {**tiny_ppo_spec(ppo={"n_envs": 32}), "resume_from": {"run_id": teacher["id"]}}
    refused = service.client.post("/api/runs", json=other_envs)
    assert _locs(refused) == [["body", "config", "ppo", "n_envs"]]
    assert "holds 16 envs, not 32" in refused.json()["detail"][0]["msg"]
    for total in (4000, 3000):  # a total that does not exceed the checkpoint's step
        done_already = {
            **tiny_ppo_spec(total_steps=total),
            "resume_from": {"run_id": teacher["id"], "step": 4000},
        }
        refused = service.client.post("/api/runs", json=done_already)
        assert _locs(refused) == [["body", "config", "ppo", "total_steps"]]
        assert "must exceed 4000, the step of the checkpoint" in refused.json()["detail"][0]["msg"]
    bad_step = {**tiny_ppo_spec(), "resume_from": {"run_id": teacher["id"], "step": 123}}
    assert _locs(service.client.post("/api/runs", json=bad_step)) == [
        ["body", "resume_from", "step"]
    ]

    student_spec = {
        "kind": "distillation",
        "env": {"name": "PointReach"},
        "network": {"kind": "mlp", "actor_hidden_sizes": [8], "critic_hidden_sizes": [8]},
        "teacher": {"run_id": teacher["id"], "step": None},
        "config": {
            "distillation": {"n_envs": 16, "rollout_length": 10, "total_steps": 4000},
            "eval": {"every_steps": 2000, "n_envs": 8, "max_episode_length": 50},
            "checkpoint_every_steps": 2000,
        },
    }
    student = service.submit(student_spec)
    done = service.wait_for(student["id"])
    assert done["status"] == "succeeded", done["error"]
    assert "losses/distillation" in done["latest_metrics"]
    listed = service.client.get(f"/api/runs/{student['id']}/checkpoints").json()["items"]
    assert [c["step"] for c in listed] == [2080, 4000]

    resumed_student = service.client.post(
        "/api/runs",
        json={**student_spec, "resume_from": {"run_id": student["id"], "step": 4000}},
    )
    assert _locs(resumed_student) == [["body", "config", "distillation", "total_steps"]]
    assert "must exceed 4000" in resumed_student.json()["detail"][0]["msg"]


@pytest.mark.slow
def test_a_playground_run_resumes_past_its_next_checkpoint(service: Service) -> None:
    # Resumed from step 16, the run's first checkpoint (32) refused the env states' static
    # numpy fields as they came back from the checkpoint ("unsupported dtype int64").
    spec = tiny_cartpole_spec(total_steps=48, checkpoint_every_steps=16)
    source = service.submit(spec)
    done = service.wait_for(source["id"], timeout=400)
    assert done["status"] == "succeeded", done["error"]
    resumed = service.submit({**spec, "resume_from": {"run_id": source["id"], "step": 16}})
    assert resumed["steps"] == 16
    done = service.wait_for(resumed["id"], timeout=400)
    assert done["status"] == "succeeded", done["error"]
    listed = service.client.get(f"/api/runs/{resumed['id']}/checkpoints").json()["items"]
    assert [c["step"] for c in listed] == [32, 48]
    # Its checkpoint at 32 was written from a resumed state; resuming from it works too.
    again = service.submit({**spec, "resume_from": {"run_id": resumed["id"], "step": 32}})
    done = service.wait_for(again["id"], timeout=400)
    assert done["status"] == "succeeded", done["error"]
    assert done["steps"] == 48
