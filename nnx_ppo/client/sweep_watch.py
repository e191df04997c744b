"""``nnx-ppo sweep``: a sweep followed in the terminal (rich): a progress bar of the trials
ended of ``max_trials``, with the ETA and the running best; a line per trial that ends."""

from __future__ import annotations

import datetime
import json
from typing import Any

from rich.console import Console

from nnx_ppo.client.client import Client
from nnx_ppo.client.terminal import printable
from nnx_ppo.client.types import TERMINAL, Sweep, SweepEvent
from nnx_ppo.progress import StepRate, eta, make_progress


def _clock(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch).strftime("%H:%M:%S")


def _params(params: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in (params or {}).items())


def _objective(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def summary(sweep: Sweep) -> str:
    """One line: the sweep's end (or state), its trials by status and its best trial."""
    counts = ", ".join(f"{n} {status}" for status, n in sorted(sweep.trial_counts.items()))
    line = f"sweep {sweep.id} {sweep.status}: {sum(sweep.trial_counts.values())} trials"
    line += f" ({counts})" if counts else ""
    if sweep.best is not None:
        best = sweep.best
        line += (
            f"; best trial #{best.trial} (run {best.run_id}) {sweep.objective.get('metric')} "
            f"{_objective(best.objective)} with {_params(best.params)}"
        )
    return f"{line}; error: {sweep.error}" if sweep.error else line


def follow(client: Client, sweep_id: str, console: Console | None = None) -> int:
    """Follows the sweep until it ends; 0 when it finished, 1 otherwise."""
    console = console or Console(highlight=False)
    sweep = client.sweep(sweep_id)
    objective = f"{sweep.objective.get('mode')} {sweep.objective.get('metric')}"
    console.print(
        f"sweep {sweep.id} ({printable(sweep.name)}): {sweep.method}, {sweep.max_trials} trials, "
        f"{sweep.parallel} at once, objective {objective}",
        markup=False,
    )
    progress = make_progress(console, unit="trials")
    rate = StepRate(window_s=600.0)
    ended: set[int] = set()
    with progress:
        task = progress.add_task(
            sweep.status, total=max(sweep.max_trials, 1), sps="", eta="", reward=""
        )
        for event in client.follow_sweep(sweep_id):
            _show(event, progress, task, rate, ended, sweep.max_trials)
    final = client.sweep(sweep_id)
    console.print(summary(final), markup=False)
    return 0 if final.status == "finished" else 1


def _show(
    event: SweepEvent, progress: Any, task: Any, rate: StepRate, ended: set[int], total: int
) -> None:
    console = progress.console
    when = _clock(event.time)
    if event.type == "trial" and event.trial is not None:
        if event.status in TERMINAL and event.trial not in ended:
            ended.add(event.trial)
            rate.add(event.time, len(ended))
            per_second = rate.per_second()
            left = f"ETA {eta(max(total - len(ended), 0) / per_second)}" if per_second else ""
            progress.update(task, completed=len(ended), eta=left)
            error = f" ({event.error})" if event.error else ""
            console.print(
                f"{when} trial #{event.trial} {event.status}: objective "
                f"{_objective(event.objective)} at step {event.steps or 0:,}, "
                f"{_params(event.params)}{error}",
                markup=False,
            )
    elif event.type == "best" and event.trial is not None:
        best = f"best {_objective(event.objective)} (#{event.trial})"
        progress.update(task, reward=best)
        console.print(f"{when} new best: trial #{event.trial}, {_objective(event.objective)}")
    elif event.type == "status":
        progress.update(task, description=event.status)
        error = f": {event.error}" if event.error else ""
        console.print(f"{when} sweep {event.status}{error}", markup=False)
