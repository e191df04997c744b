"""How a run process is asked to stop: SIGTERM, warm then cold."""

from __future__ import annotations

import os
import signal
from typing import Any


class StopSignal:
    """SIGTERM: the first asks for a warm stop, the second exits at once."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C is the server's

    def _handle(self, _signum: int, _frame: Any) -> None:
        if self.requested:
            os._exit(143)
        self.requested = True
