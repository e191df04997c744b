"""The worker supervisor: claims queued runs and executes each in its own child process.

Host loop: every ``TICK_S`` it records the exits of finished children (their outcome, or
the signal that killed them), starts claimed runs on free devices (``devices.DevicePool``:
a run asking for N devices waits queued until N are free), and from time to time
requeues the runs of workers that died. A heartbeat thread keeps the worker's row fresh.
SIGTERM is warm: the children stop after their current jitted call, write a checkpoint
and are requeued; a second SIGTERM (or SIGINT) is cold: they are killed and requeued.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from server import child_processes
from server.settings import Settings
from server.store import artifacts
from server.store.db import make_engine, make_sessionmaker, migrate
from server.store.run_status import TransitionError
from server.store.run_store import RunNotFound, RunStore
from server.worker import run_process, system_metrics
from server.worker.devices import (
    Device,
    DevicePool,
    Placement,
    detect_devices,
    placement_env,
    requested_devices,
)

log = logging.getLogger("nnx_ppo.worker")

TICK_S = 0.2
RECOVER_EVERY_S = 5.0
WARM_STOP_TIMEOUT_S = 120.0
LOG_TAIL_LINES = 20


@dataclass
class Child:
    run_id: str
    placement: Placement
    process: Any
    conn: Connection
    outcome: tuple[str, str | None] | None = None


def signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


class Supervisor:
    def __init__(self, settings: Settings, devices: list[Device] | None = None):
        self.settings = settings
        found = devices if devices is not None else detect_devices(settings.workers)
        on_gpus = any(d.kind == "gpu" for d in found)
        self.pool = DevicePool(
            found, settings.runs_per_device, settings.workers if on_gpus else None
        )
        self.nvml = system_metrics.nvml() if on_gpus else None
        self.engine = make_engine(settings.db_url)
        self.store = RunStore(make_sessionmaker(self.engine), settings.runs_dir)
        self.children: dict[str, Child] = {}
        self.stopping = 0  # 1: warm, 2: cold
        self.worker_id = ""
        self._ctx = mp.get_context("spawn")
        self._settings_json = settings.model_dump_json()

    # -- signals ------------------------------------------------------------------------

    def install_signals(self, *, interrupt: bool = True) -> None:
        """SIGTERM (and SIGINT, with ``interrupt``): the first is warm, the second cold.
        Under ``nnx-ppo serve`` the terminal's Ctrl-C is the API's to handle (it then
        stops the supervisor with SIGTERM), so ``interrupt`` is off there."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal if interrupt else signal.SIG_IGN)

    def _on_signal(self, _signum: int, _frame: Any) -> None:
        self.stopping = min(self.stopping + 1, 2)

    # -- the loop -----------------------------------------------------------------------

    def run(self) -> None:
        names = [d.name for d in self.pool.devices]
        self.worker_id = self.store.register_worker(names, self.settings.executor)
        log.info(
            "worker %s: devices %s, %d run(s) per device",
            self.worker_id,
            names,
            self.pool.runs_per_device,
        )
        beat = threading.Event()
        threading.Thread(
            target=self._heartbeat, args=(beat,), daemon=True, name="heartbeat"
        ).start()
        threading.Thread(target=self._probe_devices, daemon=True, name="probe").start()
        recovered = self._recover()
        if recovered:
            log.info("requeued runs of dead workers: %s", recovered)
        last_recover = time.monotonic()
        try:
            while not self.stopping:
                self._reap()
                self._start_claimed()
                if time.monotonic() - last_recover > RECOVER_EVERY_S:
                    self._recover()
                    last_recover = time.monotonic()
                time.sleep(TICK_S)
            self._shut_down()
        finally:
            beat.set()
            self.store.stop_worker(self.worker_id)
            self.engine.dispose()

    def _recover(self) -> list[str]:
        """Requeues the runs of dead workers (their run processes died with them)."""
        return self.store.recover_orphans(self.settings.heartbeat_timeout, self.worker_id)

    def _heartbeat(self, done: threading.Event) -> None:
        while not done.wait(self.settings.heartbeat_seconds):
            try:
                self.store.heartbeat(self.worker_id, device_use(self.pool.holders(), self.nvml))
            except Exception:
                log.exception("heartbeat failed")

    def _probe_devices(self) -> None:
        """Asks a short-lived JAX process for the backend and devices (for health)."""
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
                timeout=120,
                env=env,
                check=True,
            ).stdout.splitlines()
            backend, devices = out[-2], out[-1].split("|")
        except (OSError, subprocess.SubprocessError, IndexError):
            return
        from sqlalchemy import update

        from server.store.models import WorkerRow

        with self.store.sessions() as session, session.begin():
            session.execute(
                update(WorkerRow)
                .where(WorkerRow.id == self.worker_id)
                .values(backend=backend, devices=devices)
            )

    def _placement(self, devices: list[Device]) -> Placement:
        env = placement_env(devices, self.settings, os.environ)
        return Placement(tuple(d.name for d in devices), env)

    def _start_claimed(self) -> None:
        while (free := self.pool.free_count()) > 0:
            run = self.store.claim_next(self.worker_id, free=free, total=len(self.pool.devices))
            if run is None:
                return
            devices = self.pool.assign(run.id, requested_devices(run.spec))
            if devices is None:  # claim_next returns only runs that fit: a defect if reached
                self._requeue(run.id, f"{requested_devices(run.spec)} devices are not free")
                return
            self._spawn(run.id, self._placement(devices))

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

    def _reap(self) -> None:
        for run_id, child in list(self.children.items()):
            self._collect_outcome(child)
            if child.process.is_alive():
                continue
            child.process.join()
            self._collect_outcome(child)
            del self.children[run_id]
            self.pool.release(run_id)
            self._record_exit(child)

    @staticmethod
    def _collect_outcome(child: Child) -> None:
        try:
            if child.outcome is None and child.conn.poll():
                child.outcome = child.conn.recv()
        except (EOFError, OSError):
            pass

    def _record_exit(self, child: Child) -> None:
        """The run's final transition, from its outcome or how its process ended."""
        code = child.process.exitcode
        if code is not None and code < 0:
            cause = f"killed by signal {-code} ({signal_name(-code)})"
        else:
            cause = f"the run process exited with code {code} without reporting"
        self._end_run(child.run_id, child.outcome, cause)
        log.info("run %s ended: %s (exit code %s)", child.run_id, child.outcome, code)

    def _end_run(self, run_id: str, outcome: tuple[str, str | None] | None, cause: str) -> None:
        """The run's final transition, from the outcome its process reported; without one
        (``cause`` says how it ended), it failed, or is requeued if the worker is stopping."""
        try:
            if outcome is None:
                if self.stopping:
                    self._requeue(run_id, f"stopped with the worker ({cause})")
                else:
                    self._fail(run_id, f"{cause}{self._log_tail(run_id)}")
                return
            status, message = outcome
            if status == "succeeded":
                self.store.transition(run_id, "finish")
            elif status == "failed":
                self._fail(run_id, message or "failed")
            elif message == "cancel":
                self.store.end_stopped(run_id)  # cancelled, or pruned by its sweep
            else:
                self._requeue(run_id, "the worker stopped")
        except (TransitionError, RunNotFound) as error:
            log.warning("run %s: %s", run_id, error)

    def _fail(self, run_id: str, message: str) -> None:
        self.store.transition(run_id, "fail", message)

    def _requeue(self, run_id: str, reason: str) -> None:
        self.store.transition(run_id, "interrupt", reason)
        # It keeps its place in the queue (queued_at): ahead of runs submitted since.
        self.store.transition(run_id, "requeue", None, worker_id=None)

    def _log_tail(self, run_id: str) -> str:
        tail = artifacts.log_tail(self.settings.run_dir(run_id), LOG_TAIL_LINES).strip()
        return f"\n--- last lines of its log ---\n{tail}" if tail else ""

    def _shut_down(self) -> None:
        """Warm: SIGTERM every child and wait for it to checkpoint; cold (a second signal,
        or the timeout): SIGKILL. Every run still running is requeued."""
        for child in self.children.values():
            if child.process.is_alive():
                os.kill(child.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + WARM_STOP_TIMEOUT_S
        while self.children and self.stopping < 2 and time.monotonic() < deadline:
            self._reap()
            time.sleep(TICK_S)
        for child in self.children.values():
            if child.process.is_alive():
                child.process.kill()
        for child in list(self.children.values()):
            child.process.join(10)
        self._reap()


def main(settings_json: str | None = None, *, die_with_parent: bool = False) -> None:
    """Entry point of the supervisor (``nnx-ppo worker``, or a child of ``nnx-ppo serve``)."""
    if die_with_parent:
        run_process.die_with_parent()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = Settings.model_validate_json(settings_json) if settings_json else Settings()
    settings.ensure_dirs()
    migrate(settings.db_url)
    supervisor: Supervisor
    if settings.executor == "ray":
        from server.worker.ray_executor import RaySupervisor

        supervisor = RaySupervisor(settings)
    else:
        supervisor = Supervisor(settings)
    supervisor.install_signals(interrupt=not die_with_parent)
    supervisor.run()


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
