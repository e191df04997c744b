"""Runs tracked from any script or notebook (``track``), online or offline (``sync``)."""

from nnx_ppo.tracking.http import ReportRefused, RunEnded, TrackingError
from nnx_ppo.tracking.offline import sync
from nnx_ppo.tracking.run import TrackedRun, track

__all__ = ["ReportRefused", "RunEnded", "TrackedRun", "TrackingError", "sync", "track"]
