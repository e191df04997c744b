"""The terminal progress bar (rich) of ``nnx-ppo train`` and ``nnx-ppo watch``: env steps
done of the total, env steps/s over a sliding window, ETA and the latest eval reward."""

from __future__ import annotations

import collections
import datetime
import math

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn

RATE_WINDOW_S = 30.0
"""Env steps/s are measured over the points of the last this-many seconds (of wall time)."""


class StepRate:
    """Env steps per second from ``(wall_time, step)`` points, over a sliding window.

    ``min_interval_s``: a point closer than this to the previous one is left out (the host
    loop logs a jitted call's iterations in one burst; only the burst's first point counts).
    """

    def __init__(self, window_s: float = RATE_WINDOW_S, min_interval_s: float = 0.0):
        self.window_s = window_s
        self.min_interval_s = min_interval_s
        self.points: collections.deque[tuple[float, int]] = collections.deque()

    def add(self, wall_time: float, step: int) -> None:
        if self.points and wall_time - self.points[-1][0] < self.min_interval_s:
            return
        self.points.append((wall_time, step))
        while len(self.points) > 2 and wall_time - self.points[1][0] >= self.window_s:
            self.points.popleft()

    def per_second(self) -> float | None:
        if len(self.points) < 2:
            return None
        (t0, s0), (t1, s1) = self.points[0], self.points[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else None


def eta(seconds: float) -> str:
    return str(datetime.timedelta(seconds=round(seconds)))


def make_progress(console: Console, unit: str = "steps") -> Progress:
    """The bar: a description, the bar, steps done of the total, steps/s, ETA, reward
    (``unit``: what is counted; ``nnx-ppo sweep`` counts trials)."""
    return Progress(
        TextColumn("{task.description:<10}"),
        BarColumn(),
        TextColumn("{task.completed:>12,.0f}/{task.total:,.0f} " + unit),
        TextColumn("{task.fields[sps]}"),
        TextColumn("{task.fields[eta]}"),
        TextColumn("{task.fields[reward]}"),
        console=console,
        transient=False,
    )


def fields(rate: StepRate, step: int, total: int, reward: float | None) -> dict[str, str]:
    """The bar's text fields after ``step`` (only those that are known)."""
    out: dict[str, str] = {}
    sps = rate.per_second()
    if sps:
        out["sps"] = f"{sps:,.0f} steps/s"
        out["eta"] = f"ETA {eta(max(total - step, 0) / sps)}"
    if reward is not None:
        out["reward"] = f"eval reward {reward:.3f}" if math.isfinite(reward) else "nan"
    return out
