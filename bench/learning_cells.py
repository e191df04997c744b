"""The learning table's resumable runner: one (env, library, seed) cell at a time.

::

    nice -n 19 python -m bench.learning_cells run            # every missing cell, then stop
    python -m bench.learning_cells run --envs FingerSpin --seeds 0 --libraries nnx_ppo
    python -m bench.learning_cells status                     # which cells are done
    make learning-table                                       # run in the background

Each cell trains once in a fresh process with :func:`bench.settings.learning_table_settings`
(the same settings for both libraries) and, when it finishes, writes its own file
``bench/results/learning-table/<env>-<library>-seed<k>.json`` (atomically: a cell file is
either complete or absent). A rerun skips every cell whose file exists, so the table fills over
several runs; a cell that fails or is interrupted leaves no file and runs again next time.
Cells run one at a time (an exclusive lock on the directory refuses a second runner), in
:func:`cell_order`: seed 0 of every env for both libraries first, so that early partial
results already compare the libraries on every env.

A cell file holds the runner's result dict (``curve``: deterministic eval reward every
~250k env steps with wall seconds; ``total_seconds``; ``env_steps_per_second``; ...) plus the
load averages before and after and the start and end times. ``python -m bench.learning_report``
turns the files into ``bench/results/learning-table.md`` and one PNG of curves per env;
``run`` rewrites those after every finished cell.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.runs import RESULTS_DIR
from bench.settings import LEARNING_TABLE_ENVS, learning_table_settings

TABLE_DIR = RESULTS_DIR / "learning-table"
"""Where cell files go (one JSON per cell)."""
LIBRARIES = ("nnx_ppo", "brax")
"""Library names as the cell files and the report spell them."""
SEEDS = (0, 1, 2)
"""Seeds per (env, library)."""
KIND = "learning-table-cell"
"""The ``kind`` field of a cell file."""

Runner = Callable[[Mapping[str, Any]], dict[str, Any]]
"""Trains one cell's settings and returns the runner's result dict."""


@dataclasses.dataclass(frozen=True, order=True)
class Cell:
    """One (env, library, seed) run of the table."""

    env: str
    """A name of :data:`bench.settings.LEARNING_TABLE_ENVS`."""
    library: str
    """``nnx_ppo`` or ``brax``."""
    seed: int
    """Training seed (network init, env resets)."""

    @property
    def name(self) -> str:
        """The cell file's stem, e.g. ``FingerSpin-brax-seed1``."""
        return f"{self.env}-{self.library}-seed{self.seed}"

    def path(self, directory: Path) -> Path:
        """The cell's result file under ``directory``."""
        return directory / f"{self.name}.json"


def cell_order(
    envs: Sequence[str] = LEARNING_TABLE_ENVS,
    libraries: Sequence[str] = LIBRARIES,
    seeds: Sequence[int] = SEEDS,
) -> list[Cell]:
    """Every cell, seed-major: all envs at seed 0 (both libraries) before any seed 1.

    Within a seed the libraries alternate which goes first from env to env, so that a change
    in the machine's load over the hours does not always fall on the same library.

    Raises:
        ValueError: On an unknown env or library.
    """
    unknown = [e for e in envs if e not in LEARNING_TABLE_ENVS]
    unknown += [lib for lib in libraries if lib not in LIBRARIES]
    if unknown:
        raise ValueError(f"unknown envs or libraries {unknown}")
    cells = []
    for seed in seeds:
        for i, env in enumerate(envs):
            order = list(libraries) if (i + seed) % 2 == 0 else list(libraries)[::-1]
            cells.extend(Cell(env, library, seed) for library in order)
    return cells


def pending(cells: Sequence[Cell], directory: Path) -> list[Cell]:
    """The cells, in order, whose result file does not exist yet."""
    return [cell for cell in cells if not cell.path(directory).exists()]


def write_cell(cell: Cell, payload: Mapping[str, Any], directory: Path) -> Path:
    """Writes a finished cell's file atomically (a reader never sees half a file)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = cell.path(directory)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=1) + "\n")
    tmp.replace(path)
    return path


def run_cell(cell: Cell, runner: Runner, directory: Path) -> Path:
    """Trains one cell with ``runner`` and writes its file; returns the file's path."""
    settings = learning_table_settings(cell.env, cell.seed)
    started = time.time()
    load_before = _load()
    result = runner(settings)
    payload = {
        "kind": KIND,
        **dataclasses.asdict(cell),
        "settings": settings,
        "started": _utc(started),
        "finished": _utc(time.time()),
        "load_before": load_before,
        "load_after": _load(),
        "result": result,
    }
    return write_cell(cell, payload, directory)


@contextlib.contextmanager
def exclusive(directory: Path) -> Iterator[None]:
    """Holds an exclusive lock on ``directory`` so that only one runner trains at a time.

    Raises:
        RuntimeError: If another runner holds the lock.
    """
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(f"another learning-table runner holds {directory}/.lock") from None
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        yield


def run_pending(
    cells: Sequence[Cell],
    runners: Mapping[str, Runner],
    directory: Path,
    log: Callable[[str], None] = print,
) -> dict[str, list[str]]:
    """Runs every pending cell in order, one at a time; a failed cell is logged and skipped.

    Returns:
        ``{"done": [...], "failed": [...], "skipped": [...]}`` by cell name (``skipped``: the
        cells whose file already existed).
    """
    todo = pending(cells, directory)
    report: dict[str, list[str]] = {
        "done": [],
        "failed": [],
        "skipped": [c.name for c in cells if c not in todo],
    }
    with exclusive(directory):
        for i, cell in enumerate(todo):
            log(f"[learning-table] {i + 1}/{len(todo)} {cell.name} load {_load()}")
            try:
                path = run_cell(cell, runners[cell.library], directory)
            except (subprocess.SubprocessError, OSError, ValueError, RuntimeError) as error:
                log(f"[learning-table] {cell.name} failed: {type(error).__name__}: {error}")
                report["failed"].append(cell.name)
                continue
            final = json.loads(path.read_text())["result"]["final_eval_reward"]
            log(f"[learning-table] {cell.name} done: final eval reward {final:.1f} -> {path}")
            report["done"].append(cell.name)
    return report


def subprocess_runners(timeout_s: float | None) -> dict[str, Runner]:
    """The real runners: each cell in a fresh process (``bench.nnx_runner``, ``brax_runner``)."""
    from bench.brax_runner import run_brax_ppo_subprocess
    from bench.nnx_runner import run_nnx_ppo_subprocess

    return {
        "nnx_ppo": lambda s: run_nnx_ppo_subprocess(s, timeout_s=timeout_s),
        "brax": lambda s: run_brax_ppo_subprocess(s, timeout_s=timeout_s),
    }


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("run", "status"))
    parser.add_argument("--envs", nargs="+", default=list(LEARNING_TABLE_ENVS))
    parser.add_argument("--libraries", nargs="+", default=list(LIBRARIES), choices=LIBRARIES)
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument("--dir", type=Path, default=TABLE_DIR, help="cell files go here")
    parser.add_argument("--timeout-s", type=float, help="kill a cell after this many seconds")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """``run``: every pending cell, then stop (exit 1 if any failed). ``status``: list cells."""
    args = _parse(argv)
    try:
        cells = cell_order(args.envs, args.libraries, args.seeds)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.command == "status":
        todo = set(pending(cells, args.dir))
        for cell in cells:
            print(f"{'pending' if cell in todo else 'done   '} {cell.name}")
        print(f"{len(cells) - len(todo)}/{len(cells)} cells done in {args.dir}")
        return 0
    from bench.learning_report import write_report

    def report_so_far(message: str) -> None:
        print(message, flush=True)
        if " done: " in message:  # the table and curves always show every finished cell
            print(f"[learning-table] report: {write_report(args.dir, RESULTS_DIR)}", flush=True)

    report = run_pending(cells, subprocess_runners(args.timeout_s), args.dir, log=report_so_far)
    print(json.dumps({k: len(v) for k, v in report.items()}), flush=True)
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
