"""A run's status and the transitions between statuses (the only ones the store makes)."""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    PRUNED = "pruned"
    """A sweep's trial stopped early by the sweep's pruner (its reason in ``error``)."""
    CRASHED = "crashed"
    """A tracked (external) run whose script stopped heartbeating (``tracked_runs``)."""

    @property
    def finished(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset(
    {
        RunStatus.SUCCEEDED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.PRUNED,
        RunStatus.CRASHED,
    }
)

TRANSITIONS: dict[str, tuple[frozenset[RunStatus], RunStatus]] = {
    "start": (frozenset({RunStatus.QUEUED}), RunStatus.RUNNING),
    "finish": (frozenset({RunStatus.RUNNING}), RunStatus.SUCCEEDED),
    "fail": (frozenset({RunStatus.RUNNING, RunStatus.QUEUED}), RunStatus.FAILED),
    "cancel": (frozenset({RunStatus.QUEUED, RunStatus.RUNNING}), RunStatus.CANCELLED),
    "interrupt": (frozenset({RunStatus.RUNNING}), RunStatus.INTERRUPTED),
    "requeue": (frozenset({RunStatus.INTERRUPTED}), RunStatus.QUEUED),
    "prune": (frozenset({RunStatus.RUNNING}), RunStatus.PRUNED),
    "crash": (frozenset({RunStatus.RUNNING}), RunStatus.CRASHED),
}
"""``transition name -> (statuses it leaves from, status it reaches)``."""


class TransitionError(Exception):
    """A transition asked of a run whose status does not allow it."""

    def __init__(self, run_id: str, transition: str, status: str):
        super().__init__(f"run {run_id} is {status}: cannot {transition}")
        self.run_id = run_id
        self.transition = transition
        self.status = status


PHASES = ("compiling", "training", "evaluating", "checkpointing", "video")
"""What a ``running`` run is doing, as its process reports it in ``phase`` events
(``server.worker.run_progress``)."""
