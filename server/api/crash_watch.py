"""The API's crash watch: a thread that moves tracked runs whose script went silent to
``crashed`` (``server.store.tracked_runs.crash_silent``), so that a dead script's run is
never shown ``running`` forever. Silence while the API itself was down does not count:
the timeout runs from the watch's start at the earliest."""

from __future__ import annotations

import logging
import threading
import time

from server.store.run_store import RunStore
from server.store.tracked_runs import crash_silent

log = logging.getLogger("nnx_ppo.server")


class CrashWatch:
    def __init__(self, store: RunStore, timeout: float):
        self.store = store
        self.timeout = timeout
        self.every = min(max(timeout / 4, 0.1), 5.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="crash-watch")

    def start(self) -> None:
        self._started = time.time()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _watch(self) -> None:
        while not self._stop.wait(self.every):
            try:
                for run_id in crash_silent(self.store, self.timeout, self._started):
                    log.warning("tracked run %s crashed: its script stopped reporting", run_id)
            except Exception:  # a database blip: the next round tries again
                log.exception("the crash watch could not check the tracked runs")
