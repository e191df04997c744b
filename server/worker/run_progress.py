"""A run's progress as its process sees it, for the log and the run page: one log line per
chunk of iterations (the step reached, env steps per second since the previous line, the
newest evaluation reward), and a ``phase`` event each time the phase changes.

Phases (``PHASES``): ``compiling`` from the start of the run until the first jitted call has
returned (the host loop's first ``training``), then the host loop's own (``training``,
``evaluating``, ``checkpointing``, ``video``). A phase event carries its name and ``since``
(epoch seconds) so that a page opened later can say how long it has lasted.

Pure host code (no JAX): the run process calls ``phase`` from ``phase_fn``, ``metrics``
from ``log_fn`` and ``chunk_done`` from ``should_stop`` (asked once after each chunk) and
once more when training returns.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from server.store.run_status import PHASES

EVAL_REWARD = "eval/episode_reward"

PhaseSink = Callable[[str, float], None]
LineSink = Callable[[str], None]


class RunProgress:
    """See the module doc. ``clock`` is ``time.time`` (epoch seconds) unless a test says
    otherwise."""

    def __init__(
        self,
        on_phase: PhaseSink,
        on_line: LineSink,
        total_steps: int,
        start_step: int = 0,
        clock: Callable[[], float] = time.time,
    ):
        self.on_phase = on_phase
        self.on_line = on_line
        self.total_steps = total_steps
        self.clock = clock
        self.current: str | None = None
        self.step = start_step
        self.line_step = start_step
        self.line_time: float | None = None
        self.trained = False
        self.lines = 0
        self.eval_reward: tuple[int, float] | None = None

    def resume(self, step: int) -> None:
        """Training starts at ``step`` (a checkpoint's): the first line counts from there."""
        self.step = self.line_step = step

    def phase(self, name: str) -> None:
        """Enters phase ``name`` (the host loop's first ``training`` is ``compiling``)."""
        if name == "training" and not self.trained:
            name = "compiling"
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r}; expected one of {PHASES}")
        if name == self.current:
            return
        self.current = name
        now = self.clock()
        if self.line_time is None:  # the rate of the first line includes the compile
            self.line_time = now
        self.on_phase(name, now)

    def metrics(self, step: int, values: Mapping[str, float]) -> None:
        self.trained = True
        self.step = step
        if EVAL_REWARD in values:
            self.eval_reward = (step, float(values[EVAL_REWARD]))

    def chunk_done(self) -> None:
        """Logs the progress line of the chunk that ended (nothing when no step was made)."""
        if self.step <= self.line_step:
            return
        now = self.clock()
        seconds = now - (self.line_time if self.line_time is not None else now)
        self.on_line(self.line(seconds))
        self.lines += 1
        self.line_step, self.line_time = self.step, now

    def line(self, seconds: float) -> str:
        steps = self.step - self.line_step
        rate = f"{steps / seconds:,.0f} env steps/s" if seconds > 0 else "- env steps/s"
        if self.lines == 0:
            rate += " (with the compile)"
        percent = 100 * self.step / self.total_steps if self.total_steps > 0 else 100.0
        if self.eval_reward is None:
            evaluation = "no evaluation yet"
        else:
            at, reward = self.eval_reward
            evaluation = f"eval reward {reward:.4g} (step {at:,})"
        return f"step {self.step:,}/{self.total_steps:,} ({percent:.0f}%): {rate}, {evaluation}"
