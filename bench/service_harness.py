"""The nnx-ppo service as the service benchmarks use it: ``nnx-ppo serve`` in a subprocess on a
free port with its own data directory, an HTTP client, websocket followers, and the
run-independent facts every results file records (load, commit, date).

Kept apart from ``tests/service_harness.py`` on purpose: benchmarks never import the tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.runs import REPO_ROOT

TOKEN = "bench-token-0123456789"
TERMINAL = ("succeeded", "failed", "cancelled")
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def machine_facts() -> dict[str, Any]:
    """Load averages, CPU count, date and git commit: the context of a measurement."""
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO_ROOT
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "server", "nnx_ppo"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    ).stdout.strip()
    diff = subprocess.run(
        ["git", "diff", "HEAD", "--", "server", "nnx_ppo"],
        capture_output=True,
        cwd=REPO_ROOT,
    ).stdout
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "git_commit": commit,
        "server_or_library_modified": bool(dirty),
        "uncommitted_diff_sha256": hashlib.sha256(diff).hexdigest()[:16] if dirty else None,
        "modified_files": dirty.splitlines(),
        "load_average": list(os.getloadavg()),
        "cpus": os.cpu_count(),
    }


def percentiles(xs: Sequence[float], qs: Iterable[float] = (50, 95, 99)) -> dict[str, float]:
    """``{"p50": ..., "p95": ..., "max": ..., "n": ...}`` (nearest-rank percentiles)."""
    if not xs:
        return {"n": 0}
    s = sorted(xs)
    out: dict[str, float] = {"n": len(s)}
    for q in qs:
        out[f"p{q:g}"] = s[min(len(s) - 1, max(0, round(q / 100 * len(s) + 0.5) - 1))]
    out["max"] = s[-1]
    out["mean"] = statistics.fmean(s)
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Service:
    """``nnx-ppo serve`` as a subprocess in its own process group (``kill`` ends it all)."""

    def __init__(
        self,
        data_dir: Path,
        *,
        jax_cache: Path,
        worker: bool = True,
        env: dict[str, str] | None = None,
    ):
        self.data_dir = data_dir
        self.worker = worker
        self.jax_cache = jax_cache
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}"
        self.extra_env = env or {}
        self.process: subprocess.Popen[bytes] | None = None
        self.output = data_dir.parent / f"{data_dir.name}-serve-{self.port}.log"
        self.client = httpx.Client(base_url=self.url, timeout=60, headers=AUTH)

    def start(self, timeout: float = 120) -> Service:
        env = {
            **os.environ,
            "NNX_PPO_API_TOKEN": TOKEN,
            "NNX_PPO_JAX_CACHE": str(self.jax_cache),
            "NNX_PPO_LIST_PLAYGROUND_ENVS": "false",
            "JAX_PLATFORMS": "cpu",
            **self.extra_env,
        }
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "server.cli", "serve", "--port", str(self.port)]
        command += ["--data-dir", str(self.data_dir)]
        if not self.worker:
            command.append("--no-worker")
        with open(self.output, "ab") as out:
            self.process = subprocess.Popen(
                command,
                cwd=REPO_ROOT,
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
                if httpx.get(f"{self.url}/api/health", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"the service did not answer within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.output.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM (the service's warm stop), SIGKILL of the group after 60 s."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def close(self) -> None:
        self.stop()
        self.client.close()

    def __enter__(self) -> Service:
        return self.start()

    def __exit__(self, *_: Any) -> None:
        self.close()

    # -- API --------------------------------------------------------------------------

    def submit(self, spec: dict[str, Any]) -> dict[str, Any]:
        response = self.client.post("/api/runs", json=spec)
        if response.status_code != 201:
            raise RuntimeError(f"submit: {response.status_code} {response.text}")
        return response.json()

    def run(self, run_id: str) -> dict[str, Any]:
        response = self.client.get(f"/api/runs/{run_id}")
        response.raise_for_status()
        return response.json()

    def wait_for(self, run_id: str, statuses: Iterable[str] = TERMINAL, timeout: float = 600):
        wanted = set(statuses)
        deadline = time.monotonic() + timeout
        run: dict[str, Any] = {}
        while time.monotonic() < deadline:
            run = self.run(run_id)
            if run["status"] in wanted:
                return run
            time.sleep(0.5)
        raise TimeoutError(f"run {run_id} is {run.get('status')} after {timeout} s")

    def events(self, run_id: str, after_seq: int = 0, timeout: float = 120) -> list[dict]:
        """Every stored event after ``after_seq`` until the server closes the stream (for a
        finished run: a replay of all of them)."""
        from websockets.sync.client import connect

        url = f"{self.ws_url}/api/runs/{run_id}/stream?after_seq={after_seq}"
        out = []
        with connect(url, additional_headers=AUTH, open_timeout=30, max_size=None) as ws:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    message = ws.recv(timeout=max(0.1, deadline - time.monotonic()))
                except TimeoutError:
                    break
                except Exception:  # closed by the server: the stream ended
                    break
                out.append(json.loads(message))
        return out


def cartpole_spec(
    total_steps: int,
    *,
    n_envs: int = 256,
    rollout_length: int = 20,
    eval_every: int = 1_000_000,
    seed: int = 0,
) -> dict[str, Any]:
    """A CartpoleBalance PPO run with the benchmark's ``speed`` settings (``bench.settings``:
    256 envs x 20 steps, 4 epochs x 4 minibatches, policy 2x64, value 2x256, observation
    normalization, learning rate 1e-4, clip 0.2, discount 0.99), ``LOSSES|THROUGHPUT``
    logging, no video, and a checkpoint only at the end (``checkpoint_every_steps`` =
    ``total_steps``)."""
    return {
        "kind": "ppo",
        "name": "bench-cartpole",
        "env": {"name": "CartpoleBalance", "overrides": {"impl": "jax"}},
        "network": {
            "kind": "mlp",
            "actor_hidden_sizes": [64, 64],
            "critic_hidden_sizes": [256, 256],
            "normalize_obs": True,
            "entropy_weight": 0.0,
        },
        "config": {
            "ppo": {
                "n_envs": n_envs,
                "rollout_length": rollout_length,
                "n_minibatches": 4,
                "n_epochs": 4,
                "total_steps": total_steps,
                "learning_rate": 1e-4,
                "discounting_factor": 0.99,
                "gae_lambda": 0.95,
                "clip_range": 0.2,
                "logging_level": "LOSSES|THROUGHPUT",
            },
            "eval": {"every_steps": eval_every, "n_envs": 128, "max_episode_length": 1000},
            "video": {"enabled": False},
            "seed": seed,
            "checkpoint_every_steps": total_steps,
        },
        "tags": ["bench"],
    }


def point_reach_spec(total_steps: int, *, n_envs: int = 16, rollout_length: int = 10) -> dict:
    """The tests' tiny PointReach run (compiles in seconds); one iteration is
    ``n_envs * rollout_length`` env steps."""
    return {
        "kind": "ppo",
        "name": "bench-pointreach",
        "env": {"name": "PointReach"},
        "network": {"kind": "mlp", "actor_hidden_sizes": [16], "critic_hidden_sizes": [16]},
        "config": {
            "ppo": {
                "n_envs": n_envs,
                "rollout_length": rollout_length,
                "total_steps": total_steps,
                "logging_level": "LOSSES|THROUGHPUT",
            },
            "eval": {"every_steps": 20_000, "n_envs": 8, "max_episode_length": 50},
            "checkpoint_every_steps": total_steps,
        },
        "tags": ["bench"],
    }
