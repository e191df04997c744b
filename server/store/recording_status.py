"""A recording's status and the transitions between statuses (the only ones the store
makes)."""

from __future__ import annotations

from enum import StrEnum


class RecordingStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({RecordingStatus.SUCCEEDED, RecordingStatus.FAILED, RecordingStatus.CANCELLED})

TRANSITIONS: dict[str, tuple[frozenset[RecordingStatus], RecordingStatus]] = {
    "start": (frozenset({RecordingStatus.QUEUED}), RecordingStatus.RUNNING),
    "finish": (frozenset({RecordingStatus.RUNNING}), RecordingStatus.SUCCEEDED),
    "fail": (frozenset({RecordingStatus.QUEUED, RecordingStatus.RUNNING}), RecordingStatus.FAILED),
    "cancel": (
        frozenset({RecordingStatus.QUEUED, RecordingStatus.RUNNING}),
        RecordingStatus.CANCELLED,
    ),
}
"""``transition name -> (statuses it leaves from, status it reaches)``."""


class RecordingTransitionError(Exception):
    """A transition asked of a recording whose status does not allow it."""

    def __init__(self, recording_id: int, transition: str, status: str):
        super().__init__(f"recording {recording_id} is {status}: cannot {transition}")
        self.recording_id = recording_id
        self.transition = transition
        self.status = status
