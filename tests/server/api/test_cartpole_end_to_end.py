"""End to end on MuJoCo Playground's CartpoleBalance (``impl="jax"``): submit a PPO run
with videos, follow its stream to completion, download its video (with Range requests)
and its checkpoint, load the checkpoint, and distill a student from it."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from tests.algorithms.test_video import decode
from tests.service_harness import Service, cartpole_video_spec

pytestmark = pytest.mark.slow

CARTPOLE = cartpole_video_spec()


def test_cartpole_train_watch_download_load_distill(service: Service, tmp_path: Path) -> None:
    run = service.submit(CARTPOLE)
    events = service.events(run["id"], timeout=400)
    assert [e["status"] for e in events if e["type"] == "status"] == [
        "queued",
        "running",
        "succeeded",
    ], service.client.get(f"/api/runs/{run['id']}/logs").text
    videos = [e["video"] for e in events if e["type"] == "video"]
    assert [v["step"] for v in videos] == [1600, 3200]
    # Rendering draws no progress bars into the run's log (tqdm's redraws end in "\r" or
    # "it/s]"); the log has a progress line per chunk instead (the first, of one iteration,
    # once the compile is done), and the phases show the videos.
    log = service.client.get(f"/api/runs/{run['id']}/logs").text
    assert "\r" not in log and "it/s]" not in log, log[-2000:]
    assert [line.split(":")[0] for line in log.splitlines() if line.startswith("step ")] == [
        "step 320/3,200 (10%)",
        "step 1,600/3,200 (50%)",
        "step 3,200/3,200 (100%)",
    ], log
    assert "video" in [e["phase"] for e in events if e["type"] == "phase"]

    listed = service.client.get(f"/api/runs/{run['id']}/videos").json()
    assert listed["items"] == videos and listed["total"] == 2
    video = service.client.get(videos[-1]["url"])
    assert video.status_code == 200 and video.headers["content-type"] == "video/mp4"
    (tmp_path / "video.mp4").write_bytes(video.content)
    _fps, frames = decode(tmp_path / "video.mp4")
    # The reset state, then one frame per step.
    assert frames.shape[0] == videos[-1]["episode_length"] + 1
    assert frames.shape[1:3] == (120, 160)
    size = len(video.content)
    part = service.client.get(videos[-1]["url"], headers={"Range": "bytes=100-199"})
    assert part.status_code == 206 and part.content == video.content[100:200]
    assert part.headers["content-range"] == f"bytes 100-199/{size}"

    checkpoints = service.client.get(f"/api/runs/{run['id']}/checkpoints").json()["items"]
    assert [c["step"] for c in checkpoints] == [1600, 3200]
    archive = service.client.get(checkpoints[-1]["url"]).content
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tmp_path, filter="data")
    import jax
    import numpy as np
    from flax import nnx

    from nnx_ppo import envs
    from nnx_ppo.algorithms.teacher import load_teacher
    from nnx_ppo.presets import make_networks

    env = envs.load("CartpoleBalance", {"impl": "jax"})
    policy = load_teacher(
        str(tmp_path / "step_0000003200"),
        run["spec"]["network"],
        env.observation_size,
        env.action_size,
    )
    fresh = make_networks(run["spec"]["network"], env.observation_size, env.action_size, 3)
    trained = jax.tree.leaves(nnx.state(policy, nnx.Param))
    initial = jax.tree.leaves(nnx.state(fresh, nnx.Param))
    assert len(trained) == len(initial)
    assert any(not np.array_equal(a, b) for a, b in zip(trained, initial, strict=True))

    student = service.submit(
        {
            "kind": "distillation",
            "env": CARTPOLE["env"],
            "network": {"kind": "mlp", "actor_hidden_sizes": [16], "critic_hidden_sizes": [16]},
            "teacher": {"run_id": run["id"], "step": 3200},
            "config": {
                "distillation": {"n_envs": 32, "rollout_length": 10, "total_steps": 640},
                "eval": {"enabled": False},  # one compile less; evaluation is tested above
                "checkpoint_every_steps": 640,
            },
        }
    )
    done = service.wait_for(student["id"], timeout=400)
    assert done["status"] == "succeeded", done["error"]
    assert done["steps"] == 640 and "losses/distillation" in done["latest_metrics"]
    student_checkpoints = service.client.get(f"/api/runs/{student['id']}/checkpoints").json()
    assert [c["step"] for c in student_checkpoints["items"]] == [640]
