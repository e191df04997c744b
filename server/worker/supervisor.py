"""The worker supervisor: claims queued runs, has an ``Executor`` run each in its own
process, and makes each run's final transition from how it ended.

Host loop: every ``TICK_S`` it maps the outcomes of the runs that ended to their
transitions (``ending``), starts claimed runs while the executor has free slots, and from
time to time requeues the runs of workers that died (after the executor adopted those it
can). A heartbeat thread keeps the worker's row fresh. SIGTERM is warm: the executor stops
its runs after their current jitted call (they checkpoint and are requeued) or leaves them
going for the next supervisor; a second SIGTERM (or SIGINT), or ``WARM_STOP_TIMEOUT_S``,
is cold: they are ended at once and requeued.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from server import child_processes
from server.settings import Settings
from server.store.db import make_engine, make_sessionmaker, migrate
from server.store.run_status import TransitionError
from server.store.run_store import RunNotFound, RunStore
from server.worker.executor import (
    Ended,
    Executor,
    Exited,
    Failed,
    Lost,
    NoRoom,
    RunOutcome,
    Stopped,
    StopReason,
    Succeeded,
)

log = logging.getLogger("nnx_ppo.worker")

TICK_S = 0.2
RECOVER_EVERY_S = 5.0
WARM_STOP_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Ending:
    """A run's final transition: ``finish``; ``fail`` with ``message`` as its error;
    ``stop`` (``RunStore.end_stopped``: cancelled, or pruned by its sweep); ``requeue``
    (interrupted with ``message``, then queued again in its old place)."""

    action: Literal["finish", "fail", "stop", "requeue"]
    message: str | None = None


def ending(outcome: RunOutcome, *, stopping: bool) -> Ending:
    """The transition of a run that ended with ``outcome``; ``stopping``: the worker is
    stopping (a run process that ended without reporting was then stopped with it)."""
    match outcome:
        case Succeeded():
            return Ending("finish")
        case Failed(error):
            return Ending("fail", error or "failed")
        case Stopped(reason):
            if reason is StopReason.CANCEL:
                return Ending("stop")
            return Ending("requeue", "the worker stopped")
        case Exited(cause, log_tail):
            if stopping:
                return Ending("requeue", f"stopped with the worker ({cause})")
            return Ending("fail", f"{cause}{log_tail}")
        case Lost(reason):
            return Ending("requeue", reason)
        case _:
            assert_never(outcome)


class Supervisor:
    def __init__(self, settings: Settings, store: RunStore, executor: Executor):
        self.settings = settings
        self.store = store
        self.executor = executor
        self.stopping = 0  # 1: warm, 2: cold
        self.worker_id = ""

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
        self.executor.open()
        try:
            self._run()
        finally:
            self.executor.close()

    def _run(self) -> None:
        names = self.executor.device_names()
        self.worker_id = self.store.register_worker(names, self.settings.executor)
        log.info(
            "worker %s: devices %s, %d run(s) per device",
            self.worker_id,
            names,
            self.settings.runs_per_device,
        )
        beat = threading.Event()
        threading.Thread(
            target=self._heartbeat, args=(beat,), daemon=True, name="heartbeat"
        ).start()
        threading.Thread(target=self._describe, daemon=True, name="probe").start()
        recovered = self._recover()
        if recovered:
            log.info("requeued runs of dead workers: %s", recovered)
        last_recover = time.monotonic()
        try:
            while not self.stopping:
                self._end_runs(self.executor.poll())
                self._start_claimed()
                if time.monotonic() - last_recover > RECOVER_EVERY_S:
                    self._recover()
                    last_recover = time.monotonic()
                time.sleep(TICK_S)
            self._shut_down()
        finally:
            beat.set()
            self.store.stop_worker(self.worker_id)

    def _recover(self) -> list[str]:
        """Lets the executor adopt the runs of dead workers that still go on, and requeues
        the others (their run processes died with them)."""
        self.executor.adopt_orphans(self.worker_id)
        return self.store.recover_orphans(self.settings.heartbeat_timeout, self.worker_id)

    def _heartbeat(self, done: threading.Event) -> None:
        while not done.wait(self.settings.heartbeat_seconds):
            try:
                self.store.heartbeat(self.worker_id, *self.executor.usage())
            except Exception:
                log.exception("heartbeat failed")

    def _describe(self) -> None:
        """The worker row's backend, devices or cluster, as the executor finds them."""
        values = self.executor.describe()
        if not values:
            return
        self.store.describe_worker(self.worker_id, values)

    def _start_claimed(self) -> None:
        while (free := self.executor.free_slots()) > 0:
            total = self.executor.total_slots()
            if total is None:
                run = self.store.claim_next(self.worker_id)
            else:
                run = self.store.claim_next(self.worker_id, free=free, total=total)
            if run is None:
                return
            try:
                self.executor.start(run)
            except NoRoom as error:
                self._end_run(run.id, Lost(str(error)))
                return

    def _end_runs(self, ended: list[Ended]) -> None:
        for run_id, outcome in ended:
            self._end_run(run_id, outcome)

    def _end_run(self, run_id: str, outcome: RunOutcome) -> None:
        """The run's final transition in the store (see ``ending``)."""
        end = ending(outcome, stopping=bool(self.stopping))
        try:
            if end.action == "finish":
                self.store.transition(run_id, "finish")
            elif end.action == "fail":
                self.store.transition(run_id, "fail", end.message)
            elif end.action == "stop":
                self.store.end_stopped(run_id)
            else:
                self.store.transition(run_id, "interrupt", end.message)
                # It keeps its place in the queue (queued_at): ahead of runs submitted since.
                self.store.transition(run_id, "requeue", None, worker_id=None)
        except (TransitionError, RunNotFound) as error:
            log.warning("run %s: %s", run_id, error)

    def _shut_down(self) -> None:
        """Warm: the executor stops its runs (or leaves them going), and they are waited
        for; cold (a second signal, or the timeout): the rest are ended at once."""
        if self.stopping < 2:
            self.executor.stop_warm()
        deadline = time.monotonic() + WARM_STOP_TIMEOUT_S
        while self.executor.running() and self.stopping < 2 and time.monotonic() < deadline:
            self._end_runs(self.executor.poll())
            time.sleep(TICK_S)
        self._end_runs(self.executor.stop_cold())


def make_executor(settings: Settings, store: RunStore) -> Executor:
    """The executor that ``settings.executor`` names."""
    if settings.executor == "ray":
        from server.worker.ray_executor import RayExecutor

        return RayExecutor(settings, store)
    from server.worker.local_executor import LocalExecutor

    return LocalExecutor(settings, store)


def main(settings_json: str | None = None, *, die_with_parent: bool = False) -> None:
    """Entry point of the supervisor (``nnx-ppo worker``, or a child of ``nnx-ppo serve``)."""
    if die_with_parent:
        child_processes.die_with_parent()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = Settings.model_validate_json(settings_json) if settings_json else Settings()
    settings.ensure_dirs()
    migrate(settings.db_url)
    engine = make_engine(settings.db_url)
    try:
        store = RunStore(make_sessionmaker(engine), settings.runs_dir)
        supervisor = Supervisor(settings, store, make_executor(settings, store))
        supervisor.install_signals(interrupt=not die_with_parent)
        supervisor.run()
    finally:
        engine.dispose()
