"""The workers (supervisors) that claim runs, and the recovery of the runs a dead one left
``running``: on start-up they become ``interrupted``, then ``queued`` again, in their old
place in the queue (the run row is the source of truth; they are recovered, not
forgotten)."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from server.store.db import transaction
from server.store.models import RunRow, WorkerRow
from server.store.run_events import lock_run
from server.store.run_status import RunStatus
from server.store.run_transitions import apply_transition


class WorkerRegistry:
    """``RunStore``'s workers and orphan recovery (see the module doc)."""

    sessions: sessionmaker[Session]

    def register_worker(self, slots: Sequence[str], executor: str = "local") -> str:
        worker_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        now = time.time()
        with transaction(self.sessions) as session:
            session.add(
                WorkerRow(
                    id=worker_id,
                    hostname=socket.gethostname(),
                    pid=os.getpid(),
                    started_at=now,
                    heartbeat_at=now,
                    slots=list(slots),
                    stopped=False,
                    executor=executor,
                )
            )
        return worker_id

    def heartbeat(
        self,
        worker_id: str,
        device_use: list[dict[str, Any]] | None = None,
        cluster: list[dict[str, Any]] | None = None,
    ) -> None:
        """Keeps the worker alive; ``device_use`` and ``cluster`` (when given) replace what
        it reported."""
        values: dict[str, Any] = {"heartbeat_at": time.time()}
        if device_use is not None:
            values["device_use"] = device_use
        if cluster is not None:
            values["cluster"] = cluster
        with transaction(self.sessions) as session:
            session.execute(update(WorkerRow).where(WorkerRow.id == worker_id).values(**values))

    def describe_worker(self, worker_id: str, values: Mapping[str, Any]) -> None:
        """Sets the worker row's description (its backend, devices or cluster: the columns
        named in ``values``), as its executor finds them."""
        with self.sessions() as session, session.begin():
            session.execute(update(WorkerRow).where(WorkerRow.id == worker_id).values(**values))

    def stop_worker(self, worker_id: str) -> None:
        with transaction(self.sessions) as session:
            session.execute(update(WorkerRow).where(WorkerRow.id == worker_id).values(stopped=True))

    def workers(self) -> list[WorkerRow]:
        with self.sessions() as session:
            return list(
                session.scalars(
                    select(WorkerRow)
                    .where(WorkerRow.stopped.is_(False))
                    .order_by(WorkerRow.started_at)
                ).all()
            )

    def orphans(self, timeout: float, own_worker: str) -> list[RunRow]:
        """Runs left ``running`` by a dead worker (see ``recover_orphans``), not changed."""
        now, host = time.time(), socket.gethostname()
        with self.sessions() as session:
            workers = {w.id: w for w in session.scalars(select(WorkerRow)).all()}
            running = session.scalars(
                select(RunRow).where(
                    RunRow.status == RunStatus.RUNNING.value, RunRow.external.is_(False)
                )
            ).all()
            return [
                run
                for run in running
                if run.worker_id != own_worker
                and (
                    (worker := workers.get(run.worker_id or "")) is None
                    or worker_dead(worker, now, timeout, host)
                )
            ]

    def adopt(self, run_id: str, worker_id: str, old_worker: str | None) -> bool:
        """Moves a running run of ``old_worker`` to ``worker_id`` (a worker that took over
        its process); False if it is no longer that worker's running run."""
        with transaction(self.sessions) as session:
            run = lock_run(session, run_id)
            if run.status != RunStatus.RUNNING.value or run.worker_id != old_worker:
                return False
            run.worker_id = worker_id
            return True

    def recover_orphans(self, timeout: float, own_worker: str | None = None) -> list[str]:
        """Runs left ``running`` by a worker that is dead (stopped, silent for ``timeout``
        seconds, or a process of this host that no longer exists) become ``interrupted``,
        then ``queued``. Returns their ids. Tracked runs (``external``) have no worker:
        their scripts' heartbeats are watched instead (``tracked_runs.crash_silent``)."""
        now = time.time()
        host = socket.gethostname()
        recovered = []
        with transaction(self.sessions) as session:
            workers = {w.id: w for w in session.scalars(select(WorkerRow)).all()}
            running = session.scalars(
                select(RunRow)
                .where(RunRow.status == RunStatus.RUNNING.value, RunRow.external.is_(False))
                .order_by(RunRow.id)  # one lock order for every locker of several runs
                .with_for_update()
            ).all()
            for run in running:
                if run.worker_id == own_worker and own_worker is not None:
                    continue
                worker = workers.get(run.worker_id or "")
                if worker is not None and not worker_dead(worker, now, timeout, host):
                    continue
                apply_transition(session, run, "interrupt", "its worker stopped")
                # It keeps its place in the queue (queued_at): ahead of runs submitted since.
                apply_transition(session, run, "requeue", None, worker_id=None)
                recovered.append(run.id)
            for worker in workers.values():
                if not worker.stopped and worker_dead(worker, now, timeout, host):
                    worker.stopped = True
        return recovered


def worker_dead(worker: WorkerRow, now: float, timeout: float, host: str) -> bool:
    if worker.stopped or now - worker.heartbeat_at > timeout:
        return True
    if worker.hostname == host:
        try:
            os.kill(worker.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return _zombie(worker.pid)
    return False


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and waits to be reaped (a killed worker whose parent died
    too stays a zombie where PID 1 does not reap, as in many containers). Linux only."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return False
