"""``nnx-ppo watch``: a run's live view in the terminal (rich): a progress bar with env
steps/s and ETA, the latest eval reward, status changes, videos, checkpoints, log lines."""

from __future__ import annotations

import datetime

from rich.console import Console
from rich.progress import Progress

from nnx_ppo.client.client import Client
from nnx_ppo.client.terminal import printable
from nnx_ppo.client.types import Event, Run
from nnx_ppo.progress import StepRate, fields, make_progress

REWARD = "eval/episode_reward"


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
    env = run.spec.get("env", {}).get("name", "?")
    console.print(f"run {run.id} ({printable(run.name)}, {printable(env)})", markup=False)
    rate = StepRate()
    progress = make_progress(console)
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
        reward = (event.values or {}).get(REWARD)
        shown = fields(rate, event.step, total, reward)
        progress.update(task, completed=event.step, **shown)  # type: ignore[arg-type]
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
