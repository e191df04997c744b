"""A real nnx-ppo service for tests: ``nnx-ppo serve`` in a subprocess on a free port, with
a fresh data directory (a real SQLite file) and a real worker, plus an HTTP client.

Shared by ``tests/server``, ``tests/reliability`` and ``tests/e2e``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from nnx_ppo.client.client import SUBMIT_TIMEOUT_S

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "test-token-0123456789"
JAX_CACHE = os.environ.get("NNX_PPO_JAX_CACHE", str(ROOT / ".cache" / "jax"))
TERMINAL = ("succeeded", "failed", "cancelled", "pruned", "crashed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tiny_ppo_spec(total_steps: int = 20_000, **config: Any) -> dict[str, Any]:
    """A PointReach run that compiles in seconds and trains in a few more (with the library's
    defaults, not the env's preset: the tests that share it share its compiled programs)."""
    ppo = {
        "n_envs": 16,
        "rollout_length": 10,
        "total_steps": total_steps,
        "logging_level": "LOSSES|THROUGHPUT",
        **config.pop("ppo", {}),
    }
    return {
        "kind": "ppo",
        "env": {"name": "PointReach"},
        "preset": False,
        "network": {"kind": "mlp", "actor_hidden_sizes": [16], "critic_hidden_sizes": [16]},
        "config": {
            "ppo": ppo,
            "eval": {"every_steps": 4000, "n_envs": 8, "max_episode_length": 50},
            "checkpoint_every_steps": 4000,
            **config,
        },
    }


def tiny_cartpole_spec(total_steps: int, checkpoint_every_steps: int) -> dict[str, Any]:
    """A MuJoCo Playground run (CartpoleBalance, ``impl="jax"``) at its smallest: 4 envs x 4
    steps, 4-unit MLPs, no evaluation. Its ``mjx.Data`` env states carry static numpy
    fields, which a resumed run must carry through its next checkpoint."""
    return {
        "kind": "ppo",
        "env": {"name": "CartpoleBalance", "overrides": {"impl": "jax"}},
        "network": {"kind": "mlp", "actor_hidden_sizes": [4], "critic_hidden_sizes": [4]},
        "config": {
            "ppo": {
                "n_envs": 4,
                "rollout_length": 4,
                "total_steps": total_steps,
                "n_epochs": 1,
                "n_minibatches": 1,
            },
            "eval": {"enabled": False},
            "checkpoint_every_steps": checkpoint_every_steps,
        },
    }


def refused_locs(response: httpx.Response) -> list[list[Any]]:
    """The fields a 422 names (``detail[].loc``); fails the test on any other status."""
    assert response.status_code == 422, response.text
    return [item["loc"] for item in response.json()["detail"]]


def cartpole_video_spec() -> dict[str, Any]:
    """A short CartpoleBalance run (``impl="jax"``) that records two videos (steps 1600
    and 3200) and two checkpoints; tests that share it share its compiled programs (so the
    library's defaults, not the env's preset)."""
    return {
        "kind": "ppo",
        "name": "cartpole-e2e",
        "preset": False,
        "env": {"name": "CartpoleBalance", "overrides": {"impl": "jax"}},
        "network": {"kind": "mlp", "actor_hidden_sizes": [32], "critic_hidden_sizes": [32]},
        "config": {
            "ppo": {"n_envs": 32, "rollout_length": 10, "total_steps": 3200},
            "eval": {"every_steps": 1600, "n_envs": 8, "max_episode_length": 100},
            "video": {
                "enabled": True,
                "every_steps": 1600,
                "episode_length": 40,
                "render_kwargs": {"width": 160, "height": 120},
            },
            "checkpoint_every_steps": 1600,
            "seed": 3,
        },
    }


class Service:
    """``nnx-ppo serve`` as a subprocess (its own process group: kill() takes everything)."""

    def __init__(
        self,
        data_dir: Path,
        *,
        worker: bool = True,
        env: dict[str, str] | None = None,
        args: Iterable[str] = (),
        port: int | None = None,
    ):
        self.data_dir = data_dir
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.worker = worker
        self.extra_env = env or {}
        self.args = list(args)
        self.process: subprocess.Popen[bytes] | None = None
        self.output = data_dir.parent / f"{data_dir.name}-serve-{self.port}.log"
        self.client = httpx.Client(
            base_url=self.url, timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}
        )

    # -- process ------------------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        """The ``NNX_PPO_*`` settings of its processes (besides the data directory)."""
        return {
            "NNX_PPO_API_TOKEN": TOKEN,
            "NNX_PPO_JAX_CACHE": JAX_CACHE,
            "NNX_PPO_LIST_PLAYGROUND_ENVS": "false",
            "NNX_PPO_HEARTBEAT_SECONDS": "0.5",
            "JAX_PLATFORMS": "cpu",
            **self.extra_env,
        }

    def start(self, timeout: float = 90) -> Service:
        env = {**os.environ, **self.environment()}
        command = [
            sys.executable,
            "-m",
            "server.cli",
            "serve",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            *self.args,
        ]
        if not self.worker:
            command.append("--no-worker")
        with open(self.output, "ab") as out:
            self.process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the service exited ({self.process.returncode}):\n{self.log()}")
            try:
                health = self.client.get("/api/health", timeout=2)
                if health.status_code == 200 and (health.json()["workers"] or not self.worker):
                    return self  # the API answers and the worker has registered
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"the service did not answer within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.output.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def terminate(self, timeout: float = 150) -> int:
        """SIGTERM (warm stop); returns the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL of the whole service: API, supervisor and run processes."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def close(self) -> None:
        self.kill()
        self.client.close()

    # -- API helpers --------------------------------------------------------------------

    def submit(self, spec: dict[str, Any]) -> dict[str, Any]:
        # The first check of a Playground env loads it: as long as the client waits.
        response = self.client.post("/api/runs", json=spec, timeout=SUBMIT_TIMEOUT_S)
        assert response.status_code == 201, response.text
        return response.json()

    def run(self, run_id: str) -> dict[str, Any]:
        response = self.client.get(f"/api/runs/{run_id}")
        assert response.status_code == 200, response.text
        return response.json()

    def wait_for(
        self,
        run_id: str,
        statuses: Iterable[str] = TERMINAL,
        timeout: float = 240,
        predicate: Any = None,
    ) -> dict[str, Any]:
        wanted = set(statuses)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.run(run_id)
            if run["status"] in wanted and (predicate is None or predicate(run)):
                return run
            time.sleep(0.2)
        raise TimeoutError(
            f"run {run_id} is {run['status']} after {timeout} s:\n"
            f"{self.client.get(f'/api/runs/{run_id}/logs?tail=30').text}\n"
            f"{self.log()}"
        )

    def events(self, run_id: str, after_seq: int = 0, timeout: float = 240) -> list[dict]:
        """Every event of the stream from ``after_seq`` until the server closes it."""
        from websockets.sync.client import connect

        url = f"ws://127.0.0.1:{self.port}/api/runs/{run_id}/stream?after_seq={after_seq}"
        out = []
        with connect(
            url,
            additional_headers={"Authorization": f"Bearer {TOKEN}"},
            open_timeout=30,
            close_timeout=5,
        ) as ws:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    message = ws.recv(timeout=max(0.1, deadline - time.monotonic()))
                except TimeoutError:
                    break
                except Exception:  # closed by the server: the stream ended
                    break
                out.append(json.loads(message))
            assert ws.close_code in (None, 1000), ws.close_code
        return out
