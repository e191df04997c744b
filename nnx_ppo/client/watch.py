"""``nnx-ppo watch``: a run's live view in the terminal (rich): a progress bar with env
steps/s and ETA, the latest eval reward, status changes, videos, checkpoints, log lines."""

from __future__ import annotations

import collections
import datetime
import math

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn

from nnx_ppo.client.client import Client
from nnx_ppo.client.types import Event, Run

REWARD = "eval/episode_reward"
RATE_WINDOW_S = 30.0
"""Env steps/s are measured over the metrics of the last this-many seconds (of wall time)."""


class StepRate:
    """Env steps per second from ``(wall_time, step)`` points, over a sliding window."""

    def __init__(self, window_s: float = RATE_WINDOW_S):
        self.window_s = window_s
        self.points: collections.deque[tuple[float, int]] = collections.deque()

    def add(self, wall_time: float, step: int) -> None:
        self.points.append((wall_time, step))
        while len(self.points) > 2 and wall_time - self.points[1][0] >= self.window_s:
            self.points.popleft()

    def per_second(self) -> float | None:
        if len(self.points) < 2:
            return None
        (t0, s0), (t1, s1) = self.points[0], self.points[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else None


def _eta(seconds: float) -> str:
    return str(datetime.timedelta(seconds=round(seconds)))


def _clock(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch).strftime("%H:%M:%S")


def summary(run: Run) -> str:
    """One line: the run's end (or state), with its steps, duration and eval reward."""
    line = f"run {run.id} {run.status}: {run.steps:,} of {run.total_steps:,} steps"
    if run.started_at and run.finished_at:
        line += f" in {run.finished_at - run.started_at:.1f} s"
    reward = run.latest_metrics.get(REWARD)
    if reward is not None:
        line += f", {REWARD} {reward:.3f}"
    return f"{line}; error: {run.error}" if run.error else line


def watch(client: Client, run_id: str, console: Console | None = None) -> int:
    """Follows the run until it ends; 0 when it succeeded, 1 otherwise."""
    console = console or Console(highlight=False)
    run = client.run(run_id)
    console.print(f"run {run.id} ({run.name}, {run.spec.get('env', {}).get('name', '?')})")
    rate = StepRate()
    progress = Progress(
        TextColumn("{task.description:<10}"),
        BarColumn(),
        TextColumn("{task.completed:>12,.0f}/{task.total:,.0f} steps"),
        TextColumn("{task.fields[sps]}"),
        TextColumn("{task.fields[eta]}"),
        TextColumn("{task.fields[reward]}"),
        console=console,
        transient=False,
    )
    with progress:
        task = progress.add_task(
            run.status, total=max(run.total_steps, 1), completed=0, sps="", eta="", reward=""
        )
        for event in client.follow(run_id):
            _show(event, progress, task, rate, run.total_steps)
    final = client.run(run_id)
    console.print(summary(final), markup=False)
    return 0 if final.status == "succeeded" else 1


def _show(event: Event, progress: Progress, task: object, rate: StepRate, total: int) -> None:
    console = progress.console
    when = _clock(event.time)
    if event.type == "metrics" and event.step is not None:
        rate.add(event.wall_time or event.time, event.step)
        fields: dict[str, str] = {}
        sps = rate.per_second()
        if sps:
            fields["sps"] = f"{sps:,.0f} steps/s"
            fields["eta"] = f"ETA {_eta(max(total - event.step, 0) / sps)}"
        reward = (event.values or {}).get(REWARD)
        if reward is not None:
            fields["reward"] = f"eval reward {reward:.3f}" if math.isfinite(reward) else "nan"
        progress.update(task, completed=event.step, **fields)  # type: ignore[arg-type]
    elif event.type == "status":
        progress.update(task, description=event.status)  # type: ignore[arg-type]
        error = f": {event.error}" if event.error else ""
        console.print(f"{when} status {event.status}{error}", markup=False)
    elif event.type == "log" and event.line is not None:
        console.print(f"{when} {event.line}", markup=False)
    elif event.type == "video" and event.video is not None:
        v = event.video
        console.print(f"{when} video {v.id} at step {v.step:,} (reward {v.episode_reward:.3f})")
    elif event.type == "checkpoint" and event.checkpoint is not None:
        console.print(f"{when} checkpoint at step {event.checkpoint.step:,}")
