"""The run API from outside: submit (and the 422s), the stream, metrics, checkpoints,
logs, edit, list filters and cancel, delete — against a real service with a real worker
training real runs, on each database backend (resume and distillation, which do not depend
on the backend, are in ``test_resume_distill.py``)."""

from __future__ import annotations

import csv
import io
import tarfile
import time
from pathlib import Path

import pytest

from tests.service_harness import Service, refused_locs, tiny_ppo_spec


@pytest.fixture(scope="module")
def service(service_on_each: Service) -> Service:
    return service_on_each


_locs = refused_locs


@pytest.mark.parametrize(
    ("change", "loc"),
    [
        (lambda s: s["env"].update(name="NoSuchEnv"), ["body", "env", "name"]),
        (lambda s: s["env"].update(overrides={"no_such_key": 1}), ["body", "env", "overrides"]),
        (lambda s: s["network"].update(kind="transformer"), ["body", "network", "kind"]),
        (lambda s: s["network"].update(activation="nope"), ["body", "network", "activation"]),
        (
            lambda s: s["network"].update(actor_hidden_sizes=[0]),
            ["body", "network", "actor_hidden_sizes"],
        ),
        (lambda s: s["network"].update(lstm_size=8), ["body", "network", "lstm_size"]),
        (lambda s: s["config"]["ppo"].update(n_envs=10), ["body", "config", "ppo", "n_envs"]),
        (
            lambda s: s["config"]["ppo"].update(clip_range=3),
            ["body", "config", "ppo", "clip_range"],
        ),
        (lambda s: s["config"].update(seed="x"), ["body", "config", "seed"]),
        (  # PointReach cannot be rendered: refused at submit, not when the run starts
            lambda s: s["config"].update(video={"enabled": True}),
            ["body", "config", "video", "enabled"],
        ),
        (
            lambda s: s["network"].update(reward_streams=["task", "energy"]),
            ["body", "network", "reward_streams"],
        ),
        (  # PointReachDict observes {"state", "target"}
            lambda s: (
                s["env"].update(name="PointReachDict"),
                s["network"].update(policy_obs_key="state", value_obs_key="privileged_state"),
            ),
            ["body", "network", "value_obs_key"],
        ),
        (lambda s: s["config"].update(nope=1), ["body", "config", "nope"]),
        (
            lambda s: s.update(resume_from={"run_id": "0123456789ab"}),
            ["body", "resume_from", "run_id"],
        ),
        (lambda s: s.update(kind="distillation"), ["body"]),
        (lambda s: s.update(unknown_field=1), ["body", "unknown_field"]),
    ],
)
def test_invalid_specs_are_refused_with_the_field(service: Service, change, loc) -> None:  # type: ignore[no-untyped-def]
    spec = tiny_ppo_spec()
    change(spec)
    before = service.client.get("/api/runs").json()["total"]
    locs = _locs(service.client.post("/api/runs", json=spec))
    assert any(found[: len(loc)] == loc for found in locs), locs
    assert service.client.get("/api/runs").json()["total"] == before  # nothing queued


def test_an_env_preset_is_served_as_a_run_spec(service: Service) -> None:
    answer = service.client.get("/api/envs/PointReachEnergy/preset")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["env"], body["variant"]) == ("PointReachEnergy", "cpu")  # a CPU worker
    spec = body["spec"]
    assert spec["env"] == {"name": "PointReachEnergy", "overrides": {}, "randomize": False}
    assert spec["network"]["reward_streams"] == ["energy", "task"]
    assert spec["config"]["ppo"]["n_envs"] == 64 and spec["config"]["eval"]["n_envs"] == 32
    # A built-in env's preset has one size, whatever the variant asked for.
    gpu = service.client.get("/api/envs/PointReach/preset", params={"variant": "gpu"})
    assert gpu.status_code == 200 and gpu.json()["variant"] == "cpu"
    missing = service.client.get("/api/envs/NoSuchEnv/preset")
    assert missing.status_code == 404 and "NoSuchEnv" in missing.json()["detail"]
    bad = service.client.get("/api/envs/PointReach/preset", params={"variant": "tpu"})
    assert _locs(bad) == [["query", "variant"]]


def test_non_json_body_is_a_422(service: Service) -> None:
    response = service.client.post(
        "/api/runs", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422 and isinstance(response.json()["detail"], list)


def test_unknown_runs_are_404(service: Service) -> None:
    for path in ("/api/runs/0123456789ab", "/api/runs/..%2f..%2fetc", "/api/runs/zz/metrics"):
        response = service.client.get(path)
        assert response.status_code == 404, path
        assert "detail" in response.json()


def test_a_run_from_submit_to_download(service: Service, tmp_path: Path) -> None:
    run = service.submit({**tiny_ppo_spec(), "name": "lifecycle", "tags": ["a", "b"]})
    assert run["status"] == "queued" and run["total_steps"] == 20_000
    assert {
        "id",
        "kind",
        "name",
        "status",
        "spec",
        "tags",
        "notes",
        "created_at",
        "started_at",
        "finished_at",
        "steps",
        "total_steps",
        "latest_metrics",
        "error",
    } <= run.keys()

    events = service.events(run["id"])
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))  # from 1, no gaps
    statuses = [e["status"] for e in events if e["type"] == "status"]
    assert statuses == ["queued", "running", "succeeded"]
    assert events[-1]["type"] == "status"  # the terminal status is the last event
    metrics = [e for e in events if e["type"] == "metrics"]
    steps = [e["step"] for e in metrics]
    assert steps == sorted(set(steps)) and steps[-1] >= 20_000
    assert all({"step", "wall_time", "values", "time"} <= e.keys() for e in metrics)
    assert any("eval/episode_reward" in e["values"] for e in metrics)
    checkpoint_events = [e["checkpoint"]["step"] for e in events if e["type"] == "checkpoint"]
    assert checkpoint_events == [4000, 8000, 12000, 16000, 20000]
    # The run process's phases, each when it changes: compiling until the first chunk (one
    # iteration) is back, then per chunk (up to each 4,000-step evaluation and checkpoint,
    # 160 steps an iteration) training, evaluating and checkpointing.
    phases = [e["phase"] for e in events if e["type"] == "phase"]
    chunk = ["training", "evaluating", "checkpointing"]
    assert phases == ["compiling", *(chunk * 5)], phases
    running_at = next(e["time"] for e in events if e.get("status") == "running")
    since = [e["since"] for e in events if e["type"] == "phase"]
    assert since == sorted(since) and since[0] >= running_at - 1
    # One progress line per chunk, in the stream's log events and in the log file: the first
    # once the compile is done, before any evaluation.
    lines = [e["line"] for e in events if e["type"] == "log" and e["line"].startswith("step ")]
    assert [line.split(":")[0] for line in lines] == [
        "step 160/20,000 (1%)",
        *(f"step {s:,}/20,000 ({s // 200}%)" for s in range(4000, 20001, 4000)),
    ], lines
    assert "(with the compile), no evaluation yet" in lines[0], lines
    assert all("env steps/s" in line and "eval reward " in line for line in lines[1:]), lines

    # Reconnecting with the last seq seen replays exactly the rest, identically.
    middle = len(events) // 2
    assert service.events(run["id"], after_seq=events[middle - 1]["seq"]) == events[middle:]

    done = service.run(run["id"])
    assert done["status"] == "succeeded" and done["steps"] == 20_000
    assert done["finished_at"] >= done["started_at"] >= done["created_at"]
    assert "losses/total" in done["latest_metrics"]

    series = service.client.get(
        f"/api/runs/{run['id']}/metrics", params={"keys": "losses/total,eval/episode_reward"}
    ).json()
    assert series["series"].keys() == {"losses/total", "eval/episode_reward"}
    total = series["series"]["losses/total"]
    assert len(total["step"]) == 125 and total["step"][-1] == 20_000
    assert total["min"] == total["max"] == total["value"]  # nothing merged
    few = service.client.get(
        f"/api/runs/{run['id']}/metrics", params={"keys": "losses/total", "max_points": 10}
    ).json()
    assert len(few["series"]["losses/total"]["step"]) <= 10
    later = service.client.get(
        f"/api/runs/{run['id']}/metrics", params={"keys": "losses/total", "after_step": 19_000}
    ).json()
    assert later["series"]["losses/total"]["step"] == [
        19_040,
        19_200,
        19_360,
        19_520,
        19_680,
        19_840,
        20_000,
    ]
    table = list(
        csv.DictReader(io.StringIO(service.client.get(f"/api/runs/{run['id']}/metrics.csv").text))
    )
    assert table[0].keys() == {"step", "wall_time", "key", "value"}
    assert len({(r["step"], r["key"]) for r in table}) == len(table)

    listed = service.client.get(f"/api/runs/{run['id']}/checkpoints").json()
    assert [c["step"] for c in listed["items"]] == [4000, 8000, 12000, 16000, 20000]
    assert all(c["size_bytes"] > 0 for c in listed["items"])
    archive = service.client.get(listed["items"][-1]["url"])
    assert archive.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(archive.content)) as tar:
        assert {name.split("/")[0] for name in tar.getnames()} == {"step_0000020000"}
        tar.extractall(tmp_path, filter="data")
    _load_checkpoint(tmp_path / "step_0000020000", run["spec"])

    logs = service.client.get(f"/api/runs/{run['id']}/logs", params={"tail": 2}).text
    assert logs.strip().splitlines()[-1].startswith("finished in")

    # The same configuration again: its programs come from the program cache (not traced
    # again), and it computes the same numbers bit for bit.
    again = service.submit({**tiny_ppo_spec(), "name": "again"})
    again_events = service.events(again["id"])
    log = service.client.get(f"/api/runs/{again['id']}/logs").text
    assert "program cache: loaded train_chunk (" in log, log
    assert "program cache: loaded evaluate (" in log, log
    values = [(e["step"], e["values"]) for e in metrics]
    again_values = [(e["step"], e["values"]) for e in again_events if e["type"] == "metrics"]
    strip = ("throughput/", "system/")
    assert [
        (step, {k: v for k, v in vals.items() if not k.startswith(strip)})
        for step, vals in again_values
    ] == [
        (step, {k: v for k, v in vals.items() if not k.startswith(strip)}) for step, vals in values
    ]


def _load_checkpoint(path: Path, spec: dict) -> None:
    """``load_checkpoint`` reads the unpacked archive into networks built from the spec."""
    from nnx_ppo import envs
    from nnx_ppo.algorithms.checkpointing import load_checkpoint
    from nnx_ppo.algorithms.step import new_training_state
    from nnx_ppo.presets import make_networks

    env = envs.load(spec["env"]["name"])
    networks = make_networks(spec["network"], env.observation_size, env.action_size, 0)
    state = new_training_state(env, networks, 16, 0, 1e-4)
    loaded = load_checkpoint(str(path), state.networks, state.optimizer)
    assert loaded["step"] == 20_000


def test_edit_list_filter_and_delete(service: Service) -> None:
    run = service.submit({**tiny_ppo_spec(total_steps=800), "name": "to-edit", "tags": ["x"]})
    edited = service.client.patch(
        f"/api/runs/{run['id']}", json={"name": "edited", "tags": ["keep", "y"], "notes": "hi"}
    )
    assert edited.status_code == 200
    assert edited.json()["name"] == "edited" and edited.json()["tags"] == ["keep", "y"]
    service.wait_for(run["id"])

    def ids(**params: str) -> list[str]:
        items = service.client.get("/api/runs", params=params).json()["items"]
        return [r["id"] for r in items]

    assert run["id"] in ids(tag="keep") and run["id"] not in ids(tag="x")
    assert run["id"] in ids(q="dite") and run["id"] not in ids(q="nomatch")
    assert run["id"] in ids(status="succeeded", kind="ppo")
    assert run["id"] not in ids(status="failed")
    assert service.client.get("/api/runs", params={"status": "bogus"}).status_code == 422
    assert len(service.client.get("/api/runs", params={"limit": 1}).json()["items"]) == 1
    assert service.client.delete(f"/api/runs/{run['id']}").status_code == 204
    assert service.client.get(f"/api/runs/{run['id']}").status_code == 404
    assert not (service.data_dir / "runs" / run["id"]).exists()


def test_cancel_queued_and_running_runs(service: Service) -> None:
    long = service.submit(tiny_ppo_spec(total_steps=5_000_000))
    queued = service.submit(tiny_ppo_spec(total_steps=5_000_000))  # one worker slot: waits
    service.wait_for(long["id"], ["running"], predicate=lambda r: r["steps"] > 0)
    assert service.run(queued["id"])["status"] == "queued"
    assert service.client.delete(f"/api/runs/{long['id']}").status_code == 409

    response = service.client.post(f"/api/runs/{queued['id']}/cancel")
    assert response.status_code == 202 and response.json()["status"] == "cancelled"

    asked = time.monotonic()
    assert service.client.post(f"/api/runs/{long['id']}/cancel").status_code == 202
    cancelled = service.wait_for(long["id"], timeout=60)
    assert cancelled["status"] == "cancelled"
    assert time.monotonic() - asked < 20
    steps = [
        c["step"] for c in service.client.get(f"/api/runs/{long['id']}/checkpoints").json()["items"]
    ]
    assert steps and steps[-1] == cancelled["steps"]  # a final checkpoint where it stopped


def test_stream_of_a_finished_run_seen_to_the_end_closes_at_once(service: Service) -> None:
    run = service.submit(tiny_ppo_spec(total_steps=320))
    events = service.events(run["id"])
    assert events[-1]["type"] == "status" and events[-1]["status"] == "succeeded"
    started = time.monotonic()
    assert service.events(run["id"], after_seq=events[-1]["seq"], timeout=30) == []
    assert time.monotonic() - started < 5
