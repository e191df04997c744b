"""Starting the service's child processes so that a terminal's Ctrl-C is the parent's alone.

Ctrl-C sends SIGINT to every process of the terminal's foreground group: ``nnx-ppo serve``
and its children (spec checker, env catalogue, worker supervisor and, through it, the run
processes). Each child would raise ``KeyboardInterrupt`` wherever it was (a traceback on the
terminal) while its parent is already stopping it in order (SIGTERM: warm). A child started
by ``start`` ignores SIGINT from its first instruction: the ignored disposition survives
``exec``, and CPython installs its ``KeyboardInterrupt`` handler only over the default one.
"""

from __future__ import annotations

import signal
import threading
from multiprocessing.process import BaseProcess


def start(process: BaseProcess) -> None:
    """``process.start()`` with SIGINT ignored while the child is created (only the main
    thread can change a handler; elsewhere the child's own code ignores it, see
    ``ignore_sigint``)."""
    if threading.current_thread() is not threading.main_thread():
        process.start()
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        process.start()
    finally:
        signal.signal(signal.SIGINT, previous)


def ignore_sigint() -> None:
    """For a child's entry point: SIGINT is the parent's to handle (for a child started
    outside the main thread, where ``start`` could not arrange it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
