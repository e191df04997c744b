"""A real Ray cluster of two nodes on this machine, for tests and benches: a head and a
second node, each with one CPU, a small object store, its own temp directory and its own
scratch data directory (``NNX_PPO_NODE_DIR``); the second has a custom resource ``second``.
Every process of a node stays in the process group of its ``ray start``, which is killed
at the end (never ``ray stop``, which would stop every Ray on the machine)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.service_harness import ROOT, free_port

RAY = str(Path(sys.executable).parent / "ray")
NODE_ENV = {
    # Node loss is noticed within about two seconds instead of fifteen.
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "500",
    "RAY_health_check_failure_threshold": "4",
    "JAX_PLATFORMS": "cpu",
    "PYTHONPATH": str(ROOT),
}


@dataclass
class Node:
    temp_dir: Path
    data_dir: Path
    group: int
    """The process group of its ``ray start`` (its daemons stay in it)."""

    def raylet(self) -> psutil.Process:
        for process in psutil.process_iter(["cmdline"]):
            cmdline = process.info["cmdline"] or []
            if (
                cmdline
                and cmdline[0].endswith("raylet/raylet")
                and any(str(self.temp_dir) in arg for arg in cmdline)
            ):
                return process
        raise LookupError(f"no raylet with temp dir {self.temp_dir}")


def start_node(base: Path, name: str, args: list[str], env: dict[str, str]) -> Node:
    # Ray puts its sockets under the temp dir, and a socket's path may not exceed 107 bytes:
    # pytest's temp dirs (``/tmp/pytest-of-root/pytest-19/popen-gw1/...``) are too deep, so
    # the temp dir is a short one of its own, removed with the node.
    temp_dir = Path(tempfile.mkdtemp(prefix=f"nnxray-{name}-", dir="/tmp"))
    node = Node(temp_dir, base / f"{name}-data", 0)
    env = {**os.environ, **NODE_ENV, **env, "NNX_PPO_NODE_DIR": str(node.data_dir)}
    command = [
        RAY,
        "start",
        "--num-cpus=1",
        "--object-store-memory=100000000",
        f"--temp-dir={node.temp_dir}",
        "--disable-usage-stats",
        *args,
    ]
    with open(base / f"{name}.log", "ab") as out:
        process = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    node.group = process.pid
    if process.wait(120) != 0:
        raise RuntimeError((base / f"{name}.log").read_text()[-3000:])
    return node


def stop_node(node: Node) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(node.group, signal.SIGKILL)
    shutil.rmtree(node.temp_dir, ignore_errors=True)


@contextlib.contextmanager
def two_node_cluster(base: Path, jax_cache: str) -> Iterator[tuple[str, Node, Node]]:
    """``(address, head, second)``; the nodes' run processes use ``jax_cache``."""
    port = free_port()
    nodes: list[Node] = []
    env = {"NNX_PPO_JAX_CACHE": jax_cache}
    try:
        head = ["--head", f"--port={port}", "--include-dashboard=false"]
        nodes.append(start_node(base, "head", head, env))
        second = [f"--address=127.0.0.1:{port}", '--resources={"second": 1}']
        nodes.append(start_node(base, "second", second, env))
        yield f"127.0.0.1:{port}", nodes[0], nodes[1]
    finally:
        for node in nodes:
            stop_node(node)
