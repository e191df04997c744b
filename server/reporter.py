"""The narrow interface through which a run process reports, wherever it runs: store
metrics, store artifacts, write log lines, and ask whether it should stop."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine

from server.db import make_engine, make_sessionmaker
from server.run_store import RunStore
from server.settings import Settings

CANCEL_POLL_S = 0.5


class RunReporter:
    def __init__(self, store: RunStore, engine: Engine | None, run_id: str):
        self.store = store
        self.engine = engine
        self.run_id = run_id
        self._cancel_checked = 0.0
        self._cancelled = False

    @classmethod
    def open(cls, settings: Settings, run_id: str) -> RunReporter:
        engine = make_engine(settings.db_url)
        return cls(RunStore(make_sessionmaker(engine), settings.runs_dir), engine, run_id)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.dispose()

    def metrics(self, step: int, values: Mapping[str, float]) -> bool:
        return self.store.record_metrics(self.run_id, step, time.time(), values)

    def video(self, step: int, filename: str, episode_reward: float, episode_length: int) -> None:
        self.store.record_video(self.run_id, step, filename, episode_reward, episode_length)

    def checkpoint(self, public: dict[str, Any]) -> None:
        self.store.record_checkpoint(self.run_id, public)

    def log(self, line: str) -> None:
        """A line for the log file and the run's stream."""
        print(line, file=sys.stderr, flush=True)
        self.store.record_log(self.run_id, line)

    def cancel_requested(self) -> bool:
        """Whether the run was cancelled (asked at most every ``CANCEL_POLL_S``)."""
        now = time.monotonic()
        if not self._cancelled and now - self._cancel_checked >= CANCEL_POLL_S:
            self._cancel_checked = now
            self._cancelled = self.store.cancel_requested(self.run_id)
        return self._cancelled
