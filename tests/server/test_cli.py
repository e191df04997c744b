"""``nnx-ppo serve`` / ``nnx-ppo worker`` from the shell: a separate worker process against
the API's database, clear errors for bad options, a warm stop on SIGTERM."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.service_harness import JAX_CACHE, ROOT, Service, tiny_ppo_spec


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        cwd=ROOT,
        text=True,
        capture_output=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_bad_options_fail_cleanly(tmp_path: Path) -> None:
    bad_port = _cli("serve", "--port", "70000", "--data-dir", str(tmp_path / "d"))
    assert bad_port.returncode == 2
    assert "port" in bad_port.stderr and "Traceback" not in bad_port.stderr
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    bad_dir = _cli("serve", "--data-dir", str(blocker / "data"))
    assert bad_dir.returncode == 2
    assert "error:" in bad_dir.stderr and "Traceback" not in bad_dir.stderr
    short_token = _cli(
        "serve", "--data-dir", str(tmp_path / "d2"), env={"NNX_PPO_API_TOKEN": "short"}
    )
    assert short_token.returncode == 2 and "api_token" in short_token.stderr


def test_a_separate_worker_runs_what_the_api_queues(tmp_path: Path) -> None:
    api = Service(tmp_path / "data", worker=False).start()
    worker = None
    try:
        run = api.submit(tiny_ppo_spec(total_steps=1920))
        assert api.client.get("/api/health").json()["workers"] == []
        env = {
            **os.environ,
            "NNX_PPO_JAX_CACHE": JAX_CACHE,
            "JAX_PLATFORMS": "cpu",
            "NNX_PPO_HEARTBEAT_SECONDS": "0.5",
        }
        worker = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "worker", "--data-dir", str(api.data_dir)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        done = api.wait_for(run["id"], timeout=180)
        assert done["status"] == "succeeded" and done["steps"] == 1920
        workers = api.client.get("/api/health").json()["workers"]
        assert [w["pid"] for w in workers] == [worker.pid]
        worker.terminate()
        assert worker.wait(60) == 0
        assert api.client.get("/api/health").json()["workers"] == []  # deregistered
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait(10)
        api.close()
