"""The run process's progress: one log line per chunk and a ``phase`` event per change
(``server.worker.run_progress``), and no progress bars in its log (``quiet_progress_bars``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from server.worker.run_progress import RunProgress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make() -> tuple[RunProgress, Clock, list[tuple[str, float]], list[str]]:
    clock, phases, lines = Clock(), [], []
    progress = RunProgress(
        lambda name, since: phases.append((name, since)), lines.append, 20_000, clock=clock
    )
    return progress, clock, phases, lines


def test_one_line_per_chunk_with_rate_and_newest_eval_reward() -> None:
    progress, clock, phases, lines = make()
    progress.phase("compiling")
    clock.now += 40  # the compile
    progress.phase("training")  # the host loop's first: still compiling
    clock.now += 10
    for step in range(800, 4001, 800):
        progress.metrics(step, {"losses/total": 1.0})
    progress.phase("evaluating")
    progress.metrics(4000, {"eval/episode_reward": 12.345678})
    progress.chunk_done()
    # 4,000 steps in the 50 s since the run started compiling: 80 steps/s.
    assert lines == [
        "step 4,000/20,000 (20%): 80 env steps/s (with the compile), eval reward 12.35 (step 4,000)"
    ]
    progress.chunk_done()  # asked again without a new step: no line
    assert len(lines) == 1
    progress.phase("training")
    clock.now += 2
    progress.metrics(8000, {"losses/total": 1.0})
    progress.chunk_done()
    # 4,000 steps in 2 s: 2,000 steps/s; the eval reward is still the one of step 4,000.
    assert lines[1] == "step 8,000/20,000 (40%): 2,000 env steps/s, eval reward 12.35 (step 4,000)"
    assert phases == [
        ("compiling", 1000.0),
        ("evaluating", 1050.0),
        ("training", 1050.0),
    ]


def test_a_resumed_run_counts_from_its_checkpoint() -> None:
    progress, clock, _phases, lines = make()
    progress.resume(16_000)
    progress.phase("compiling")
    clock.now += 4
    progress.metrics(20_000, {})
    progress.chunk_done()
    assert lines == [
        "step 20,000/20,000 (100%): 1,000 env steps/s (with the compile), no evaluation yet"
    ]


def test_phase_changes_only_and_unknown_phases_are_refused() -> None:
    progress, clock, phases, _lines = make()
    progress.phase("compiling")
    progress.phase("training")  # before any metrics: compiling still
    progress.metrics(160, {})
    clock.now += 1
    progress.phase("training")
    progress.phase("training")
    progress.phase("checkpointing")
    assert [name for name, _ in phases] == ["compiling", "training", "checkpointing"]
    with pytest.raises(ValueError, match="unknown phase 'sleeping'"):
        progress.phase("sleeping")


def test_no_progress_bars_in_a_run_log(tmp_path: Path) -> None:
    # What the run process does before JAX and MuJoCo Playground are imported, then a tqdm
    # bar as Playground's render draws one (40 frames of CartpoleBalance: 26 redraws, 1,502
    # bytes, measured without this), with standard error going to a file.
    # tqdm reads TQDM_DISABLE when it is imported: what a spawned run process imports before
    # ``main`` runs (its module, and the parent's main module, ``server.cli``) must not
    # import it.
    script = (
        "import sys, server.cli, server.worker.run_process\n"
        "assert 'tqdm' not in sys.modules, 'tqdm imported before the run process can quiet it'\n"
        "from server.worker.run_process import quiet_progress_bars\n"
        "quiet_progress_bars()\n"
        "import tqdm\n"
        "for _ in tqdm.tqdm(range(50)): pass\n"
    )
    log = tmp_path / "run.log"
    with open(log, "w") as out:
        subprocess.run([sys.executable, "-c", script], stderr=out, check=True, cwd=Path.cwd())
    assert log.read_text() == ""
