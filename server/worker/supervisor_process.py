"""The local worker supervisor as a child process of ``nnx-ppo serve``."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal

from server import child_processes
from server.settings import Settings
from server.worker import supervisor

STOP_TIMEOUT_S = supervisor.WARM_STOP_TIMEOUT_S + 15


class SupervisorProcess:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.process: mp.process.BaseProcess | None = None

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        self.process = ctx.Process(
            target=supervisor.main,
            args=(self.settings.model_dump_json(),),
            kwargs={"die_with_parent": True},
            name="nnx-ppo-worker",
        )
        child_processes.start(self.process)

    def stop(self) -> None:
        """Warm stop (its runs checkpoint and are requeued), then a kill after a timeout."""
        process = self.process
        if process is None or process.pid is None or not process.is_alive():
            return
        os.kill(process.pid, signal.SIGTERM)
        process.join(STOP_TIMEOUT_S)
        if process.is_alive():
            process.kill()
            process.join(5)
