"""``nnx-ppo serve`` / ``nnx-ppo worker`` from the shell: a separate worker process against
the API's database, clear errors for bad options, a warm stop on SIGTERM."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.service_harness import JAX_CACHE, ROOT, Service, free_port, tiny_ppo_spec


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


def test_ctrl_c_stops_serve_without_a_traceback(tmp_path: Path) -> None:
    # A terminal's Ctrl-C sends SIGINT to the whole foreground process group: the API and
    # its children (spec checker, env catalogue, worker supervisor). Each child printed a
    # KeyboardInterrupt traceback; the API must stop cleanly and all of them with it.
    service = Service(tmp_path / "data").start()
    try:
        assert service.process is not None
        assert service.client.post("/api/runs", json={"env": {"name": "Nope"}}).status_code == 422
        time.sleep(1.0)  # the children idle, JAX imported (the spec checker loaded an env)
        os.killpg(service.process.pid, signal.SIGINT)
        code = service.process.wait(60)
        output = service.log()
        assert code in (0, 130), output
        assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    finally:
        service.close()


def _serve_without_a_token_setting(data_dir: Path, port: int, *args: str) -> tuple[Any, str]:
    """``nnx-ppo serve --no-worker`` with no NNX_PPO_API_TOKEN; its process and the token
    in its data directory once it answers."""
    env = {k: v for k, v in os.environ.items() if k != "NNX_PPO_API_TOKEN"}
    env["NNX_PPO_LIST_PLAYGROUND_ENVS"] = "false"
    command = ["serve", "--no-worker", "--port", str(port), "--data-dir", str(data_dir)]
    process = subprocess.Popen(
        [sys.executable, "-m", "server.cli", *command, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                token_file = data_dir / "api_token"
                assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
                return process, token_file.read_text().strip()
        except httpx.TransportError:
            pass
        assert process.poll() is None, "serve exited"
        time.sleep(0.2)
    process.kill()
    raise TimeoutError("serve did not answer")


def test_the_token_survives_a_restart_and_new_token_rotates_it(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    runs = f"http://127.0.0.1:{port}/api/runs"

    def status(token: str) -> int:
        return httpx.get(runs, headers={"Authorization": f"Bearer {token}"}).status_code

    tokens = []
    for args in ((), (), ("--new-token",)):
        process, token = _serve_without_a_token_setting(data_dir, port, *args)
        try:
            assert status(token) == 200
            tokens.append(token)
            if len(tokens) == 2:
                assert tokens[1] == tokens[0]  # a restart keeps it
            if len(tokens) == 3:
                assert tokens[2] != tokens[0] and status(tokens[0]) == 401  # rotated out
        finally:
            process.terminate()
            assert process.wait(60) == 0
