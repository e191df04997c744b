"""A run's scalars as a TensorBoard event file, written with tensorboardX.

Every stored point of every metric at its step and wall time (TensorBoard scalars are
32-bit floats; NaN and the infinities are kept as such).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from sqlalchemy import Engine, text

ROWS = text("SELECT step, wall_time, key, value FROM metrics WHERE run_id = :r ORDER BY step, key")


def write_event_file(engine: Engine, run_id: str, directory: Path) -> Path:
    """Writes ``directory/events.out.tfevents.*`` with the run's scalars; returns its path."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(
        logdir=str(directory), max_queue=10_000, flush_secs=3600, filename_suffix=f".{run_id}"
    )
    try:
        with engine.connect() as conn:
            rows: Iterable[tuple[int, float, str, float | None]] = conn.execute(
                ROWS, {"r": run_id}
            ).tuples()
            for step, wall_time, key, value in rows:
                number = math.nan if value is None else value  # SQLite's NULL is NaN
                writer.add_scalar(key, number, global_step=step, walltime=wall_time)
    finally:
        writer.close()
    (path,) = directory.glob("events.out.tfevents.*")
    return path
