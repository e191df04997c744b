"""JAX's own accounting of where start-up time goes, for a run's log: tracing to a jaxpr,
lowering to MLIR, and XLA's compilation (which the persistent cache skips on a hit).

Listens to ``jax.monitoring`` duration events; imports JAX, so only run processes use it.
"""

from __future__ import annotations

import jax

_PHASES = {
    "/jax/core/compile/jaxpr_trace_duration": "tracing",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lowering",
    "/jax/core/compile/backend_compile_duration": "XLA compile",
}


class CompileClock:
    """Seconds spent per phase since it was created (all threads of the process)."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(_PHASES.values(), 0.0)
        jax.monitoring.register_event_duration_secs_listener(self._on_event)

    def _on_event(self, event: str, duration_secs: float, **_kwargs: str | int) -> None:
        phase = _PHASES.get(event)
        if phase is not None:
            self.seconds[phase] += duration_secs

    def summary(self) -> str:
        parts = ", ".join(f"{phase} {s:.1f} s" for phase, s in self.seconds.items())
        return f"JAX start-up so far: {parts}"
