"""The local executor: each run in its own child process of the supervisor (``spawn``), on
devices of this host (``devices.DevicePool``: a run asking for N devices waits queued until
N are free).

A child sends its outcome over a pipe before it exits; one that exits without (it crashed,
or a signal killed it) ends ``Exited``, with the last lines of its log. Stopping warm
sends SIGTERM to every child (it stops after its current jitted call and checkpoints);
stopping cold kills them.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from server import child_processes
from server.settings import Settings
from server.store import artifacts
from server.store.models import RunRow
from server.store.run_store import RunStore
from server.worker import run_process, system_metrics
from server.worker.devices import (
    Device,
    DevicePool,
    Placement,
    detect_devices,
    placement_env,
    requested_devices,
)
from server.worker.executor import Ended, Exited, NoRoom, RunOutcome

log = logging.getLogger("nnx_ppo.worker")

LOG_TAIL_LINES = 20
PROBE_TIMEOUT_S = 120


@dataclass
class Child:
    run_id: str
    placement: Placement
    process: Any
    conn: Connection
    outcome: RunOutcome | None = None


def signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


class LocalExecutor:
    """Runs as children of this process, on this host's devices (see the module doc)."""

    def __init__(self, settings: Settings, store: RunStore, devices: list[Device] | None = None):
        self.settings = settings
        self.store = store
        found = devices if devices is not None else detect_devices(settings.workers)
        on_gpus = any(d.kind == "gpu" for d in found)
        self.pool = DevicePool(
            found, settings.runs_per_device, settings.workers if on_gpus else None
        )
        self.nvml = system_metrics.nvml() if on_gpus else None
        self.children: dict[str, Child] = {}
        self._ctx = mp.get_context("spawn")
        self._settings_json = settings.model_dump_json()

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def device_names(self) -> list[str]:
        return [d.name for d in self.pool.devices]

    def describe(self) -> dict[str, Any]:
        """The backend and devices, from a short-lived JAX process on the first device."""
        env = dict(os.environ)
        env.update(self._placement(self.pool.devices[:1]).env)
        code = (
            "import jax; print(jax.default_backend()); "
            "print('|'.join(str(d) for d in jax.devices()))"
        )
        try:
            out = subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                env=env,
                check=True,
            ).stdout.splitlines()
            backend, devices = out[-2], out[-1].split("|")
        except (OSError, subprocess.SubprocessError, IndexError):
            return {}
        return {"backend": backend, "devices": devices}

    def usage(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        return device_use(self.pool.holders(), self.nvml), None

    # -- runs ---------------------------------------------------------------------------

    def free_slots(self) -> int:
        return self.pool.free_count()

    def total_slots(self) -> int | None:
        return len(self.pool.devices)

    def start(self, run: RunRow) -> None:
        wanted = requested_devices(run.spec)
        devices = self.pool.assign(run.id, wanted)
        if devices is None:  # claim_next returns only runs that fit: a defect if reached
            raise NoRoom(f"{wanted} devices are not free")
        self._spawn(run.id, self._placement(devices))

    def _placement(self, devices: list[Device]) -> Placement:
        env = placement_env(devices, self.settings, os.environ)
        return Placement(tuple(d.name for d in devices), env)

    def _spawn(self, run_id: str, placement: Placement) -> None:
        parent, child_end = self._ctx.Pipe(duplex=False)
        process = self._ctx.Process(
            target=run_process.main,
            args=(run_id, self._settings_json, placement, child_end),
            name=f"nnx-ppo-run-{run_id}",
        )
        try:
            child_processes.start(process)  # the terminal's Ctrl-C is this process's
        except BaseException:
            self.pool.release(run_id)
            raise
        child_end.close()
        self.children[run_id] = Child(run_id, placement, process, parent)
        self.store.set_pid(run_id, process.pid, node=socket.gethostname())
        log.info("run %s started on %s (pid %s)", run_id, ",".join(placement.devices), process.pid)

    def poll(self) -> list[Ended]:
        ended: list[Ended] = []
        for run_id, child in list(self.children.items()):
            _collect_outcome(child)
            if child.process.is_alive():
                continue
            child.process.join()
            _collect_outcome(child)
            del self.children[run_id]
            self.pool.release(run_id)
            ended.append((run_id, self._outcome(child)))
        return ended

    def _outcome(self, child: Child) -> RunOutcome:
        """What the child reported or, without a report, how its process ended."""
        code = child.process.exitcode
        log.info("run %s ended: %s (exit code %s)", child.run_id, child.outcome, code)
        if child.outcome is not None:
            return child.outcome
        if code is not None and code < 0:
            cause = f"killed by signal {-code} ({signal_name(-code)})"
        else:
            cause = f"the run process exited with code {code} without reporting"
        return Exited(cause, self._log_tail(child.run_id))

    def _log_tail(self, run_id: str) -> str:
        tail = artifacts.log_tail(self.settings.run_dir(run_id), LOG_TAIL_LINES).strip()
        return f"\n--- last lines of its log ---\n{tail}" if tail else ""

    def running(self) -> int:
        return len(self.children)

    def adopt_orphans(self, worker_id: str) -> None:
        """Nothing to adopt: the run processes of a dead worker died with it."""

    def stop_warm(self) -> None:
        for child in self.children.values():
            if child.process.is_alive():
                os.kill(child.process.pid, signal.SIGTERM)

    def stop_cold(self) -> list[Ended]:
        for child in self.children.values():
            if child.process.is_alive():
                child.process.kill()
        for child in list(self.children.values()):
            child.process.join(10)
        return self.poll()


def _collect_outcome(child: Child) -> None:
    try:
        if child.outcome is None and child.conn.poll():
            child.outcome = child.conn.recv()
    except (EOFError, OSError):
        pass


def device_use(holders: dict[str, list[str]], nvml: Any | None) -> list[dict[str, Any]]:
    """What a worker reports with its heartbeat: each device, the runs on it and, for a GPU
    where NVIDIA's driver answers, its utilization, memory, temperature and power."""
    use: list[dict[str, Any]] = []
    for name, runs in holders.items():
        entry: dict[str, Any] = {"device": name, "runs": runs}
        kind, _, index = name.partition(":")
        if nvml is not None and kind == "gpu" and index.isdigit():
            prefix = f"system/gpu{index}/"
            stats = system_metrics.gpu_metrics(nvml, int(index))
            entry.update({key.removeprefix(prefix): value for key, value in stats.items()})
        use.append(entry)
    return use
