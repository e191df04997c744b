"""Where a run's process executes, behind one protocol, and how a run ended.

The supervisor decides *which* run starts (it claims runs from the store); an ``Executor``
decides *where* its process runs: ``LocalExecutor`` (children of the supervisor on this
host's devices) or ``RayExecutor`` (Ray actors on a cluster). Every run an executor starts
ends with exactly one ``RunOutcome`` from ``poll`` (or ``stop_cold``), which the supervisor
maps to the run's transition in the store.

A run process reports ``Succeeded``, ``Failed`` or ``Stopped`` itself (over a pipe, or as
its Ray actor's result); ``Exited`` and ``Lost`` are the executor's word for a run whose
process ended without reporting.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from server.store.models import RunRow


class StopReason(StrEnum):
    """Why a run process stopped before the end of its training."""

    CANCEL = "cancel"
    """Its run was cancelled, or pruned by its sweep (the store tells which)."""
    SHUTDOWN = "shutdown"
    """Its worker is stopping (SIGTERM): it checkpointed, and resumes when claimed again."""


@dataclass(frozen=True)
class Succeeded:
    """The run trained to its end."""


@dataclass(frozen=True)
class Failed:
    """The run failed (an error in its spec, its env, a divergence...)."""

    error: str


@dataclass(frozen=True)
class Stopped:
    """The run process stopped when asked to, after a checkpoint."""

    reason: StopReason


@dataclass(frozen=True)
class Exited:
    """The run process ended without reporting an outcome (it crashed, or was killed)."""

    cause: str
    """How it ended, e.g. ``killed by signal 9 (SIGKILL)``."""
    log_tail: str = ""
    """The last lines of its log, to append to its error."""


@dataclass(frozen=True)
class Lost:
    """The executor lost the run through no fault of its own (its node died, it went
    silent, or the worker stopped cold): it is requeued."""

    reason: str


RunOutcome = Succeeded | Failed | Stopped | Exited | Lost

Ended = tuple[str, RunOutcome]
"""A run that ended: its id and its outcome."""


class NoRoom(Exception):
    """``Executor.start`` found no room for a claimed run (its devices are taken)."""


class Executor(Protocol):
    """Starts claimed runs somewhere and reports how they ended. Called from the
    supervisor's loop, except ``usage`` and ``describe`` (its heartbeat and probe
    threads)."""

    def open(self) -> None:
        """Before the first run (connects to a cluster)."""

    def close(self) -> None:
        """After the last (disconnects)."""

    def device_names(self) -> list[str]:
        """The worker's slots, as registered (``gpu:0``, ``cpu:0``, ``ray:0``)."""
        ...

    def describe(self) -> dict[str, Any]:
        """The worker row's description (backend, devices, cluster); may take a while;
        empty when unknown."""
        ...

    def usage(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """What the heartbeat reports: each device's use, and the cluster's nodes (None:
        no cluster)."""
        ...

    def free_slots(self) -> int:
        """How many devices a run claimed now could get (0: claim nothing now)."""
        ...

    def total_slots(self) -> int | None:
        """All of this worker's devices, to claim only runs that fit; None: the executor
        places runs of any size (a cluster's scheduler queues what does not fit)."""
        ...

    def start(self, run: RunRow) -> None:
        """Starts the claimed ``run``'s process; ``NoRoom`` when it does not fit."""

    def poll(self) -> list[Ended]:
        """The runs that ended since the last call."""
        ...

    def running(self) -> int:
        """How many of its runs are still going."""
        ...

    def adopt_orphans(self, worker_id: str) -> None:
        """Takes over the runs of dead workers that still go on (before the supervisor
        requeues the rest)."""

    def stop_warm(self) -> None:
        """The worker is stopping: the runs checkpoint and stop, or are left going for the
        next worker."""

    def stop_cold(self) -> list[Ended]:
        """Ends every run still going at once; how they ended."""
        ...
