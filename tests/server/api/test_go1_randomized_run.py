"""A Go1 run with MuJoCo Playground's domain randomizer trains through the service: the
spec names only the env and a tiny size, the preset switches randomization on, the run
process trains with the randomizer, and its checkpoint carries the envs' model variants:
a run resumed from it must randomize too, and steps those very variants.

Sized as ``tests/envs/test_randomization_go1.py`` (4 envs x 4 steps, 8-unit networks, no
evaluation), so the run process finds that test's compiled program in the shared cache.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest

from tests.service_harness import Service

pytestmark = pytest.mark.slow

GO1 = "Go1JoystickFlatTerrain"


def test_a_go1_run_trains_with_playgrounds_randomizer(service: Service, tmp_path: Path) -> None:
    spec = {
        "env": {"name": GO1},
        "preset": {"variant": "cpu"},
        "network": {"actor_hidden_sizes": [8], "critic_hidden_sizes": [8]},
        "config": {
            "ppo": {"n_envs": 4, "n_minibatches": 1, "rollout_length": 4, "total_steps": 16},
            "eval": {"enabled": False},
        },
    }
    response = service.client.post("/api/runs", json=spec, timeout=300)
    assert response.status_code == 201, response.text
    run = response.json()
    assert run["spec"]["env"]["randomize"] is True  # Go1's preset randomizes
    assert "env.randomize" in run["spec"]["preset"]["filled"]
    done = service.wait_for(run["id"], timeout=900)
    log = service.client.get(f"/api/runs/{run['id']}/logs").text
    assert done["status"] == "succeeded", log[-3000:]
    assert f"domain randomization: MuJoCo Playground's randomizer for {GO1}" in log

    checkpoints = service.client.get(f"/api/runs/{run['id']}/checkpoints").json()["items"]
    assert [c["step"] for c in checkpoints] == [16]
    # Resuming it: only with randomization, which its envs' model variants need.
    resume = {**spec, "resume_from": {"run_id": run["id"]}}
    resume["config"] = {**spec["config"], "ppo": {**spec["config"]["ppo"], "total_steps": 32}}
    resume["env"] = {"name": GO1, "randomize": False}
    refused = service.client.post("/api/runs", json=resume, timeout=300)
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert [d["loc"] for d in detail] == [["body", "env", "randomize"]], detail
    assert "trained with domain randomization" in detail[0]["msg"]
    # With it, the resumed run steps the very variants of the checkpoint it starts from.
    resume["env"] = {"name": GO1}  # the preset's: on
    resumed = service.submit(resume)
    done = service.wait_for(resumed["id"], timeout=900)
    log = service.client.get(f"/api/runs/{resumed['id']}/logs").text
    assert done["status"] == "succeeded", log[-3000:]
    assert "resuming from" in log
    first, second = (variants(service, r["id"], tmp_path / r["id"]) for r in (run, resumed))
    assert first.keys() == second.keys() and ".geom_friction" in first
    for path, value in first.items():
        np.testing.assert_array_equal(second[path], value)
    floor = first[".geom_friction"][:, 0, 0]  # U(0.4, 1.0) per env
    assert np.all((floor >= 0.4) & (floor <= 1.0)) and len(set(floor.tolist())) == 4


def variants(service: Service, run_id: str, directory: Path) -> dict[str, np.ndarray]:
    """The model variants the envs of a run's newest checkpoint carry (downloaded)."""
    from nnx_ppo.algorithms.checkpoint_metadata import decode, read_metadata
    from nnx_ppo.envs.randomization import VARIANT_KEY

    newest = service.client.get(f"/api/runs/{run_id}/checkpoints").json()["items"][-1]
    archive = service.client.get(newest["url"]).content
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(directory, filter="data")
    (step_dir,) = directory.glob("step_*")
    meta = read_metadata(str(step_dir / "metadata.pkl"))
    env_states = decode(meta["env_states"], "env_states")
    return {k: np.asarray(v) for k, v in env_states.info[VARIANT_KEY].items()}
