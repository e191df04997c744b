"""Plugin envs and networks through a live service: the example plugin
(``tests/plugin_example``: env ``TwoLinkArm``, network ``plugin:tiny``, the broken env
``BrokenArm``) is listed, trains, resumes, exports and is recorded; a name that is not an
installed entry point is a 422 and imports nothing; a plugin run teaches a student and a
sweep tunes the plugin network's keyword arguments; a plugin that breaks is unavailable, or
fails its run with its traceback in the log."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest

from tests.service_harness import Service, refused_locs

PACKAGE = "plugin:nnx-ppo-example-plugin"


@pytest.fixture(scope="module")
def sentinel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The file ``nnx_ppo_example_plugin.sentinel`` creates when anything imports it."""
    return tmp_path_factory.mktemp("sentinel") / "imported"


@pytest.fixture(scope="module")
def service(
    tmp_path_factory: pytest.TempPathFactory, example_plugin: dict[str, str], sentinel: Path
) -> Iterator[Service]:
    env = {**example_plugin, "NNX_PPO_PLUGIN_SENTINEL": str(sentinel)}
    svc = Service(tmp_path_factory.mktemp("service") / "data", env=env).start()
    yield svc
    svc.close()


def arm_spec(**changes: Any) -> dict[str, Any]:
    """TwoLinkArm with the plugin's network, at its smallest: 8 envs x 8 steps."""
    spec: dict[str, Any] = {
        "kind": "ppo",
        "env": {"name": "TwoLinkArm", "overrides": {"episode_length": 16}},
        "network": {"kind": "plugin:tiny", "kwargs": {"hidden": 8, "value_sizes": [8]}},
        "config": {
            "ppo": {"n_envs": 8, "rollout_length": 8, "total_steps": 128, "n_minibatches": 2},
            "eval": {"enabled": False},
            "checkpoint_every_steps": 64,
        },
    }
    spec.update(changes)
    return spec


def test_plugin_envs_are_listed_with_sizes_and_a_broken_one_with_its_error(service: Service):
    deadline = time.monotonic() + 120
    while True:
        items = {e["name"]: e for e in service.client.get("/api/envs").json()["items"]}
        if items["TwoLinkArm"]["details_known"] and items["BrokenArm"]["details_known"]:
            break
        assert time.monotonic() < deadline, items
        time.sleep(0.5)
    arm, broken = items["TwoLinkArm"], items["BrokenArm"]
    assert (arm["source"], arm["available"]) == (PACKAGE, True)
    assert (arm["observation_size"], arm["action_size"]) == (8, 2)
    assert (broken["source"], broken["available"]) == (PACKAGE, False)
    assert "fails to import on purpose" in broken["reason"]
    networks = service.client.get("/api/networks").json()["items"]
    assert networks == [
        {"kind": "mlp", "source": "builtin"},
        {"kind": "lstm", "source": "builtin"},
        {"kind": "graph", "source": "builtin"},
        {"kind": "plugin:tiny", "source": PACKAGE},
    ]


@pytest.mark.parametrize(
    ("change", "loc"),
    [
        ({"network": {"kind": "plugin:nope"}}, ["body", "network", "kind"]),
        ({"network": {"kind": "plugin:tiny", "kwargs": {"nope": 1}}}, ["network", "nope"]),
        ({"network": {"kind": "plugin:tiny", "kwargs": {"hidden": "8"}}}, ["network", "hidden"]),
        ({"network": {"kind": "plugin:tiny", "kwargs": {"normalize": "x"}}}, ["normalize"]),
        ({"network": {"kind": "os:system"}}, ["body", "network", "kind"]),
        ({"network": {"kind": "plugin:os:system"}}, ["body", "network", "kind"]),
        # Module paths of an importable module: never imported (the sentinel says).
        ({"network": {"kind": "plugin:nnx_ppo_example_plugin.sentinel"}}, ["network", "kind"]),
        ({"env": {"name": "nnx_ppo_example_plugin.sentinel:mark"}}, ["body", "env", "name"]),
        ({"env": {"name": "nnx_ppo_example_plugin.sentinel"}}, ["body", "env", "name"]),
        ({"env": {"name": "BrokenArm"}}, ["body", "env", "name"]),
        ({"env": {"name": "TwoLinkArm", "overrides": {"dt": "x"}}}, ["env", "overrides"]),
    ],
)
def test_names_that_are_not_installed_plugins_are_refused_and_nothing_is_imported(
    service: Service, sentinel: Path, change: dict[str, Any], loc: list[str]
):
    refused = refused_locs(service.client.post("/api/runs", json=arm_spec(**change)))
    if loc[-1] in ("nope", "hidden", "normalize"):
        loc = ["body", "network", "kwargs", loc[-1]]
    elif loc[0] != "body":
        loc = ["body", *loc]
    assert refused == [loc]
    assert not sentinel.exists()


def test_a_plugin_run_trains_resumes_and_exports(service: Service):
    first = service.submit(arm_spec())
    done = service.wait_for(first["id"], timeout=300)
    logs = service.client.get(f"/api/runs/{first['id']}/logs").text
    assert done["status"] == "succeeded", logs
    checkpoints = service.client.get(f"/api/runs/{first['id']}/checkpoints").json()["items"]
    assert [c["step"] for c in checkpoints] == [64, 128]

    config = arm_spec()["config"]
    config["ppo"]["total_steps"] = 192
    resumed = service.submit(arm_spec(config=config, resume_from={"run_id": first["id"]}))
    again = service.wait_for(resumed["id"], timeout=300)
    logs = service.client.get(f"/api/runs/{resumed['id']}/logs").text
    assert again["status"] == "succeeded", logs
    assert "resuming from" in logs and "(step 128)" in logs

    url = f"/api/runs/{resumed['id']}/checkpoints/192/policy?format=stablehlo"
    exported = service.client.get(url, timeout=120)
    assert exported.status_code == 200, exported.text
    program = jax.export.deserialize(bytearray(exported.content))
    obs = np.zeros((3, 8), np.float32)
    (action,) = program.call(obs)
    assert action.shape == (3, 2) and np.all(np.abs(action) <= 1)

    # A recording of the plugin network's units on the plugin env, as of any run's.
    body = {"n_envs": 2, "episode_length": 12, "seed": 1}
    created = service.client.post(f"/api/runs/{resumed['id']}/recordings", json=body, timeout=180)
    assert created.status_code == 201, created.text
    url = f"/api/runs/{resumed['id']}/recordings/{created.json()['id']}"
    deadline = time.monotonic() + 300
    while (recording := service.client.get(url).json())["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, recording
        time.sleep(0.5)
    assert recording["status"] == "succeeded", recording["error"]
    manifest = recording["manifest"]
    assert manifest["step"] == 192 and manifest["env"]["name"] == "TwoLinkArm"
    assert manifest["populations"] and all(n > 0 for n in manifest["populations"].values())
    assert manifest["arrays"]["obs"]["shape"] == [12, 2, 8]


def test_a_plugin_run_teaches_a_student_and_a_sweep_tunes_its_network(service: Service):
    teacher = service.submit(arm_spec())
    assert service.wait_for(teacher["id"], timeout=300)["status"] == "succeeded"
    student = service.submit(
        {
            **arm_spec(),
            "kind": "distillation",
            "teacher": {"run_id": teacher["id"], "step": None},
            "config": {
                "distillation": {"n_envs": 8, "rollout_length": 8, "total_steps": 128},
                "eval": {"enabled": False},
                "checkpoint_every_steps": 64,
            },
        }
    )
    taught = service.wait_for(student["id"], timeout=300)
    logs = service.client.get(f"/api/runs/{student['id']}/logs").text
    assert taught["status"] == "succeeded", logs
    assert f"teacher: run {teacher['id']}, checkpoint step 128" in logs
    assert "losses/distillation" in taught["latest_metrics"]
    checkpoints = service.client.get(f"/api/runs/{student['id']}/checkpoints").json()["items"]
    assert [c["step"] for c in checkpoints] == [64, 128]

    # A grid over the plugin network's own keyword argument: one trial per value.
    body = {
        "spec": arm_spec(),
        "space": {"network.kwargs.hidden": {"grid": [4, 16]}},
        "method": "grid",
        "objective": {"metric": "losses/total", "mode": "min"},
    }
    created = service.client.post("/api/sweeps", json=body, timeout=180)
    assert created.status_code == 201, created.text
    sweep_id = created.json()["id"]
    deadline = time.monotonic() + 300
    while (swept := service.client.get(f"/api/sweeps/{sweep_id}").json())["status"] == "running":
        assert time.monotonic() < deadline, swept
        time.sleep(0.5)
    assert swept["status"] == "finished", swept
    trials = swept["trials"]
    assert sorted(t["params"]["network.kwargs.hidden"] for t in trials) == [4, 16]
    assert all(t["status"] == "succeeded" and t["objective"] is not None for t in trials), trials
    for trial in trials:
        spec = service.run(trial["run_id"])["spec"]
        assert spec["network"]["kwargs"]["hidden"] == trial["params"]["network.kwargs.hidden"]


def test_a_plugin_env_that_breaks_mid_run_fails_the_run_with_its_traceback(service: Service):
    spec = arm_spec(env={"name": "TwoLinkArm", "overrides": {"break_in_step": True}})
    run = service.submit(spec)
    done = service.wait_for(run["id"], timeout=300)
    logs = service.client.get(f"/api/runs/{run['id']}/logs").text
    assert done["status"] == "failed", logs
    assert "TwoLinkArm.step broke" in done["error"]
    assert "nnx_ppo_example_plugin/arm.py" in logs and "Traceback" in logs
