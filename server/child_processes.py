"""Starting the service's child processes so that a terminal's Ctrl-C is the parent's alone.

Ctrl-C sends SIGINT to every process of the terminal's foreground group: ``nnx-ppo serve``
and its children (spec checker, env catalogue, worker supervisor and, through it, the run
processes). Each child would raise ``KeyboardInterrupt`` wherever it was (a traceback on the
terminal) while its parent is already stopping it in order (SIGTERM: warm). A child started
by ``start`` ignores SIGINT from its first instruction: the ignored disposition survives
``exec``, and CPython installs its ``KeyboardInterrupt`` handler only over the default one.

A child that must not outlive its parent (a run process, the worker supervisor, a recording
job) calls ``die_with_parent`` first.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from multiprocessing.process import BaseProcess

PR_SET_PDEATHSIG = 1


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


def die_with_parent() -> None:
    """Asks Linux to SIGKILL this process when its parent exits; a watchdog thread covers
    the gap before the call and other systems."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(1.0)

    threading.Thread(target=watch, daemon=True, name="parent-watchdog").start()
