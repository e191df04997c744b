"""The run process: executes one run (``train_ppo`` or ``train_distillation``) in a child
of the worker supervisor, started with ``spawn``.

It reports through a ``Reporter`` (metrics, videos, checkpoints, log lines, cancel):
``RunReporter`` to the database and the data directory when it runs beside them, or
``HttpReporter`` to the API with a run token when it runs on another node (given
``remote``; then ``settings.data_dir`` is that node's own scratch directory). It ends by
sending its outcome (``executor.RunOutcome``: ``Succeeded``, ``Stopped`` or ``Failed``) to
its parent over a pipe. Status transitions are the supervisor's. Its output (Python's and
the C libraries') goes to ``logs/run.log``, without progress bars (``quiet_progress_bars``):
its own progress is one log line per chunk. SIGTERM is warm (stop after the current jitted
call, checkpoint, exit); a second SIGTERM is cold (``stop_signal``). The process dies with
its parent.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING

from server import child_processes
from server.settings import Settings
from server.store import artifacts
from server.worker.devices import Placement
from server.worker.executor import Failed, RunOutcome
from server.worker.reporter import Reporter, RunReporter
from server.worker.stop_signal import StopSignal

if TYPE_CHECKING:
    from server.worker.http_reporter import RemoteAccess


def redirect_output(log_path: Path) -> None:
    """Points file descriptors 1 and 2 (and so ``print``, logging and C libraries) at the
    run's log file, appending."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115


def quiet_progress_bars() -> None:
    """Turns tqdm's bars off when standard error is not a terminal (a run's log file).
    MuJoCo Playground's ``render`` draws one over a video's frames, which a log file keeps as
    a line per redraw (~50 per video). tqdm reads ``TQDM_*`` defaults when it is imported,
    so this runs before anything imports it."""
    if not sys.stderr.isatty():
        os.environ["TQDM_DISABLE"] = "1"


def main(
    run_id: str,
    settings_json: str,
    placement: Placement,
    conn: Connection,
    remote: RemoteAccess | None = None,
) -> None:
    """Entry point of the child process (see the module doc). ``placement.env`` pins it
    to its devices; it is applied before JAX is imported."""
    child_processes.die_with_parent()
    stop = StopSignal()
    os.environ.update(placement.env)
    os.environ.setdefault("MUJOCO_GL", "egl")
    settings = Settings.model_validate_json(settings_json)
    if settings.run_niceness:
        os.nice(settings.run_niceness)
    run_dir = settings.run_dir(run_id)
    redirect_output(artifacts.logs_dir(run_dir) / artifacts.LOG_FILE)
    quiet_progress_bars()
    reporter: Reporter
    outcome: RunOutcome
    if remote is None:
        reporter = RunReporter.open(settings, run_id)
    else:
        reporter = remote.reporter(run_id, settings.max_upload_bytes)
    try:
        from server.worker.execution import RunExecution

        outcome = RunExecution(settings, run_id, reporter, stop, placement).execute()
        reporter.flush()  # the closing log lines are stored before the outcome is
    except Exception as error:
        traceback.print_exc()
        outcome = Failed(describe_error(error))
        with contextlib.suppress(Exception):  # store what was reported before the failure
            reporter.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        conn.send(outcome)
    finally:
        conn.close()
        reporter.close()


def describe_error(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        where = f": {error.filename}" if error.filename else ""
        return f"{error.strerror}{where}"
    text = str(error) or type(error).__name__
    return text if isinstance(error, ValueError) else f"{type(error).__name__}: {text}"
