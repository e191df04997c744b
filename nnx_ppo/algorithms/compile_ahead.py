"""Compiling a program in a background thread while the host loop compiles and runs another.

The training chunk and the evaluator are separate programs, and the evaluator is first
called only after the first chunk has run, so compiling it then made a cold start wait for
the two compiles one after the other, and the first evaluation stop training for its own.
``CompiledAhead`` lowers a jitted function in the caller's thread (under the caller's JAX
settings: matmul precision, default device) and compiles it in a background thread; the first
call waits for that compile, and every call runs the same program as the plain jitted function
would. Background compiles run one at a time, in the order they were lowered: one XLA:CPU
compile keeps ~1.5 of a 2-core machine's cores busy, and the chunk, lowered first and needed
first, compiled alone brought the first metric ~3 s sooner than beside the evaluator
(``bench.startup_split``, CartpoleSwingup); the evaluator then compiles while the first
iterations run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

# Held by the background compile running; the next waits for it.
_ONE_COMPILE_AT_A_TIME = threading.Lock()
THREAD_NAME = "nnx-ppo-compile-ahead"
"""The name of every background compile's thread (``bench.nnx_runner`` looks for it)."""


class CompiledAhead:
    """``jitted`` for arguments shaped like ``args``, compiled in a background thread.

    Calls with arguments of other shapes or types, and any failure of the background
    compile, fall back to ``jitted`` itself, whose own trace and compile then raise what
    there is to raise, in the caller's thread. The thread is not a daemon: a process that
    ends while it compiles (training stopped by an error) waits for the compile, where a
    daemon thread still inside XLA made the interpreter's exit abort.
    """

    def __init__(self, jitted: Any, *args: Any):
        self.jitted = jitted
        self.compiled: Callable[..., Any] | None = None
        lowered = jitted.lower(*args)  # here: the trace sees the caller's settings
        self.thread = threading.Thread(target=self._compile, args=(lowered,), name=THREAD_NAME)
        self.thread.start()

    def _compile(self, lowered: Any) -> None:
        try:
            with _ONE_COMPILE_AT_A_TIME:
                self.compiled = lowered.compile()
        except Exception:  # the plain call raises it again, in the caller's thread
            self.compiled = None

    def __call__(self, *args: Any) -> Any:
        self.thread.join()
        if self.compiled is not None:
            try:
                return self.compiled(*args)
            except (TypeError, ValueError):  # arguments unlike the lowered ones
                self.compiled = None
        return self.jitted(*args)
