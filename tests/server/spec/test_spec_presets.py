"""A spec that names an env takes the env's preset for every field it leaves out (the
stored spec shows the values and which came from the preset); explicit fields win;
``"preset": false`` opts out; totals; and every problem of a spec in one 422.

The service has no worker: these tests judge what is stored, which is what a run trains
with (the run process reads the stored spec's env, network and config).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.service_harness import Service, refused_locs, tiny_ppo_spec

# PointReach's preset (nnx_ppo.presets._builtin_preset): 300k steps, 64 envs x 16 steps,
# learning rate 1e-3, evaluations every 50k (6 over the total) on 32 envs of 100 steps,
# checkpoints every 100k (3), an MLP actor (32,) and critic (64, 64).


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = Service(tmp_path_factory.mktemp("presets") / "data", worker=False).start()
    # The spec checker's first answer waits for its JAX import (long on a loaded machine).
    assert svc.client.get("/api/envs/PointReach/preset", timeout=180).status_code == 200
    yield svc
    svc.close()


def _submit(service: Service, spec: dict[str, Any]) -> dict[str, Any]:
    response = service.client.post("/api/runs", json=spec)
    assert response.status_code == 201, response.text
    run: dict[str, Any] = response.json()
    return run


def test_the_readme_example_gets_the_env_preset(service: Service) -> None:
    # The README's client example: PointReach, 200k steps, only the env named.
    run = _submit(
        service, {"env": {"name": "PointReach"}, "config": {"ppo": {"total_steps": 200_000}}}
    )
    spec = run["spec"]
    assert run["total_steps"] == 200_000
    ppo = spec["config"]["ppo"]
    assert (ppo["n_envs"], ppo["rollout_length"], ppo["learning_rate"]) == (64, 16, 1e-3)
    assert ppo["total_steps"] == 200_000  # the spec's own value wins
    assert spec["network"] == {
        "kind": "mlp",
        "actor_hidden_sizes": [32],
        "critic_hidden_sizes": [64, 64],
    }
    assert spec["config"]["eval"]["n_envs"] == 32
    assert spec["config"]["eval"]["max_episode_length"] == 100
    # The cadences follow the new total: 6 evaluations (300k / 50k) over 200k is one every
    # ceil(200000 / 6) = 33334 steps; 3 checkpoints (300k / 100k): every ceil(200000 / 3).
    assert spec["config"]["eval"]["every_steps"] == 33_334
    assert spec["config"]["checkpoint_every_steps"] == 66_667
    preset = spec["preset"]
    assert (preset["name"], preset["variant"], preset["source"]) == ("PointReach", "cpu", "tuned")
    filled = set(preset["filled"])
    assert {"config.ppo.n_envs", "network.critic_hidden_sizes", "config.eval.every_steps"} <= filled
    assert "config.ppo.total_steps" not in filled
    # The stored spec is resolved: submitted again as it is, it is the same run setup.
    again = _submit(service, spec)["spec"]
    assert again["config"] == spec["config"] and again["network"] == spec["network"]


def test_explicit_fields_win_over_the_preset(service: Service) -> None:
    spec = {
        "env": {"name": "PointReach"},
        "network": {"actor_hidden_sizes": [8]},
        "config": {"ppo": {"n_envs": 32}, "eval": {"every_steps": 1000}, "seed": 3},
    }
    stored = _submit(service, spec)["spec"]
    assert stored["network"]["actor_hidden_sizes"] == [8]
    assert stored["network"]["critic_hidden_sizes"] == [64, 64]  # from the preset
    assert stored["config"]["ppo"]["n_envs"] == 32 and stored["config"]["seed"] == 3
    assert stored["config"]["ppo"]["n_minibatches"] == 4  # from the preset
    assert stored["config"]["eval"]["every_steps"] == 1000
    assert stored["config"]["checkpoint_every_steps"] == 100_000  # the preset's own total
    filled = set(stored["preset"]["filled"])
    assert not filled & {"network.actor_hidden_sizes", "config.ppo.n_envs", "config.seed"}

    # Another network kind than the preset's (MemoryCue's is an LSTM) takes none of its
    # network fields; left out, the kind is the preset's too.
    memory = _submit(service, {"env": {"name": "MemoryCue"}, "network": {"kind": "mlp"}})
    assert memory["spec"]["network"] == {"kind": "mlp"}
    assert memory["spec"]["config"]["eval"]["max_episode_length"] == 12
    lstm = _submit(service, {"env": {"name": "MemoryCue"}})["spec"]["network"]
    assert lstm["kind"] == "lstm" and lstm["lstm_size"] == 32


def test_preset_false_gives_the_library_defaults(service: Service) -> None:
    spec = {"env": {"name": "PointReach"}, "config": {"ppo": {"total_steps": 200_000}}}
    run = _submit(service, {**spec, "preset": False})
    assert run["spec"]["preset"] is False
    assert run["spec"]["config"] == {"ppo": {"total_steps": 200_000}}  # the rest: defaults
    assert run["spec"]["network"] == {"kind": "mlp"}


def test_env_randomize_is_the_presets_stored_and_refused_without_a_randomizer(
    service: Service,
) -> None:
    # Go1's preset trains with Playground's domain randomizer, as Playground does.
    go1 = {"env": {"name": "Go1JoystickFlatTerrain"}, "config": {"ppo": {"total_steps": 1e6}}}
    stored = service.client.post("/api/runs", json=go1, timeout=180).json()["spec"]
    assert stored["env"]["randomize"] is True and "env.randomize" in stored["preset"]["filled"]
    go1["env"]["randomize"] = False  # the spec's own value wins
    stored = service.client.post("/api/runs", json=go1, timeout=180).json()["spec"]
    assert stored["env"]["randomize"] is False and "env.randomize" not in stored["preset"]["filled"]
    # PointReach's preset does not randomize; without a preset, nothing does.
    assert _submit(service, {"env": {"name": "PointReach"}})["spec"]["env"]["randomize"] is False
    plain = _submit(service, {"env": {"name": "PointReach"}, "preset": False})["spec"]
    assert plain["env"] == {"name": "PointReach", "overrides": {}, "randomize": False}
    for name in ("PointReach", "CartpoleBalance"):  # no randomizer: refused on the switch
        spec = {"env": {"name": name, "randomize": True}, "config": {"ppo": {"total_steps": 1e5}}}
        response = service.client.post("/api/runs", json=spec, timeout=180)
        assert refused_locs(response) == [["body", "env", "randomize"]], response.text
        assert f"'{name}' has no domain randomizer" in response.json()["detail"][0]["msg"]
    bad = {"env": {"name": "PointReach", "randomize": "yes"}}
    assert refused_locs(service.client.post("/api/runs", json=bad)) == [
        ["body", "env", "randomize"]
    ]


def test_integral_float_totals_are_accepted_and_huge_ones_refused(service: Service) -> None:
    run = _submit(service, {"env": {"name": "PointReach"}, "config": {"ppo": {"total_steps": 1e6}}})
    assert run["total_steps"] == 1_000_000
    assert run["spec"]["config"]["eval"]["every_steps"] == 166_667  # 6 evaluations over 1e6
    for total in (1e15, 10**13):
        spec = {"env": {"name": "PointReach"}, "config": {"ppo": {"total_steps": total}}}
        response = service.client.post("/api/runs", json=spec)
        assert refused_locs(response) == [["body", "config", "ppo", "total_steps"]]
        assert "1e+12" in response.json()["detail"][0]["msg"]
    bad = {"env": {"name": "PointReach"}, "config": {"ppo": {"total_steps": 1.5e6 + 0.5}}}
    assert refused_locs(service.client.post("/api/runs", json=bad)) == [
        ["body", "config", "ppo", "total_steps"]
    ]


def test_every_problem_of_a_spec_is_reported_at_once(service: Service) -> None:
    spec = tiny_ppo_spec()
    spec["config"]["ppo"].update(n_envs=10, clip_range=3)  # two of PPOConfig's own checks
    spec["config"]["eval"]["n_envs"] = "x"
    spec["config"]["nope"] = 1
    spec["network"]["activation"] = "nope"
    spec["resume_from"] = {"run_id": "0123456789ab"}
    locs = refused_locs(service.client.post("/api/runs", json=spec))
    expected = [
        ["body", "config", "ppo", "n_envs"],
        ["body", "config", "ppo", "clip_range"],
        ["body", "config", "eval", "n_envs"],
        ["body", "config", "nope"],
        ["body", "network", "activation"],
        ["body", "resume_from", "run_id"],
    ]
    assert sorted(locs) == sorted(expected), locs


def test_schema_and_config_problems_are_reported_together(service: Service) -> None:
    spec = tiny_ppo_spec()
    spec["name"] = ""  # the schema refuses it (1 to 200 characters)
    spec["tags"] = ["ok", "bell\u0007"]  # and this (a control character)
    spec["config"]["ppo"]["clip_range"] = 3  # PPOConfig's own check, behind the schema's
    spec["resume_from"] = {"run_id": "0123456789ab"}  # a reference to no run
    locs = refused_locs(service.client.post("/api/runs", json=spec))
    assert ["body", "name"] in locs and ["body", "config", "ppo", "clip_range"] in locs, locs
    assert ["body", "resume_from", "run_id"] in locs, locs
    assert any(loc[:2] == ["body", "tags"] for loc in locs), locs
    # A refused env: the config cannot be judged without it, and only the env is named.
    spec["env"] = {"name": 3}
    locs = refused_locs(service.client.post("/api/runs", json=spec))
    assert ["body", "config", "ppo", "clip_range"] not in locs, locs
    assert any(loc[:2] == ["body", "env"] for loc in locs), locs


def test_a_sweep_base_spec_takes_the_preset(service: Service) -> None:
    body = {
        "spec": {"env": {"name": "PointReach"}, "config": {"ppo": {"total_steps": 20_000}}},
        "space": {"config.ppo.learning_rate": {"choice": [1e-3, 3e-4]}},
        "method": "grid",
    }
    response = service.client.post("/api/sweeps", json=body)
    assert response.status_code == 201, response.text
    spec = response.json()["request"]["spec"]
    assert spec["config"]["ppo"]["n_envs"] == 64 and spec["preset"]["name"] == "PointReach"
    assert spec["config"]["eval"]["every_steps"] == 3334  # 6 evaluations over 20k
    service.client.post(f"/api/sweeps/{response.json()['id']}/cancel")


def test_every_bad_value_of_a_sweep_space_is_reported_at_once(service: Service) -> None:
    body = {
        "spec": {"env": {"name": "PointReach"}, "config": {"ppo": {"total_steps": 20_000}}},
        "space": {
            "config.ppo.learning_rate": {"uniform": [-1, 1e-3]},
            "config.ppo.clip_range": {"choice": [0.2, 3]},
        },
    }
    response = service.client.post("/api/sweeps", json=body, timeout=180)  # 5 specs checked
    assert sorted(refused_locs(response)) == [
        ["body", "space", "config.ppo.clip_range"],
        ["body", "space", "config.ppo.learning_rate"],
    ]


def test_the_variant_is_the_workers_unless_the_spec_pins_one(service: Service) -> None:
    # CartpoleSwingup's Playground preset: 2048 envs on a GPU, 256 in the CPU variant. The
    # service has no GPU worker: CPU, as GET /api/envs/{name}/preset answers.
    cpu = service.client.post(
        "/api/runs", json={"env": {"name": "CartpoleSwingup"}}, timeout=180
    ).json()["spec"]
    assert (cpu["preset"]["variant"], cpu["config"]["ppo"]["n_envs"]) == ("cpu", 256)
    gpu = service.client.post(
        "/api/runs",
        json={"env": {"name": "CartpoleSwingup"}, "preset": {"variant": "gpu"}},
        timeout=180,
    ).json()["spec"]
    assert (gpu["preset"]["variant"], gpu["config"]["ppo"]["n_envs"]) == ("gpu", 2048)
    assert gpu["preset"]["source"] == "playground"
    other = {"env": {"name": "CartpoleSwingup"}, "preset": {"name": "PointReach"}}
    response = service.client.post("/api/runs", json=other, timeout=180)
    assert refused_locs(response) == [["body", "preset", "name"]]
