"""The host loop shared by ``train_ppo`` and ``train_distillation``.

Host loop (impure): it decides how many iterations can run before the next host-side event
(evaluation, checkpoint, video, the end), runs them in one jitted call (a ``lax.scan`` over
the pure step function), hands each iteration's metrics to ``log_fn`` in order, and performs
the events. What it carries between calls is a tuple of plain pytrees whose first entry is
the ``nnx.State`` of ``(policy, optimizer)``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.algorithms.config import EvalConfig
from nnx_ppo.algorithms.rollout import eval_rollout
from nnx_ppo.algorithms.types import LoggingLevel, RLEnv

MAX_ITERATIONS_PER_CALL = 32
"""Upper bound on iterations fused into one jitted call."""

LogFn = Callable[[dict[str, Any], int], None]
StopFn = Callable[[], bool]


def iterations_until(steps: int, every: int, steps_per_iteration: int) -> int:
    """Iterations until the step count first passes a multiple of ``every``."""
    target = (steps // every + 1) * every
    return max(1, math.ceil((target - steps) / steps_per_iteration))


def passed_multiple(before: int, after: int, every: int) -> bool:
    """Whether the step count passed a multiple of ``every`` going from before to after."""
    return after // every > before // every


def scan_iterations(one_iteration: Callable[[Any, Any], tuple[Any, dict]], length: int):
    """Jits ``run(state, extra, n_active)``: up to ``length`` calls of ``one_iteration``.

    ``one_iteration(state, extra) -> (state, metrics)`` is a pure step; ``extra`` is read
    only (never donated). The first ``n_active`` iterations run (a traced count, so any count
    up to ``length`` reuses one compilation); metrics come back stacked on a leading
    ``[length]`` axis, zeros past ``n_active``. ``state`` is donated.
    """

    def run(state: Any, extra: Any, n_active: jax.Array) -> tuple[Any, dict]:
        metric_shapes = jax.eval_shape(one_iteration, state, extra)[1]

        def skip(s: Any) -> tuple[Any, dict]:
            return s, jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), metric_shapes)

        def body(s: Any, i: jax.Array) -> tuple[Any, dict]:
            return jax.lax.cond(i < n_active, lambda s: one_iteration(s, extra), skip, s)

        return jax.lax.scan(body, state, jnp.arange(length))

    return jax.jit(run, donate_argnums=0)


def make_evaluator(env: RLEnv, graphdef: Any, cfg: EvalConfig):
    """Jits ``evaluate(module_state, key)``: ``eval_rollout`` of the policy in
    ``nnx.merge(graphdef, module_state)[0]`` (the state of ``(policy, optimizer)``)."""

    def evaluate(module_state: Any, key: jax.Array) -> dict[str, jax.Array]:
        policy = nnx.merge(graphdef, module_state)[0]
        return eval_rollout(
            env,
            policy,
            cfg.n_envs,
            cfg.max_episode_length,
            key,
            cfg.logging_percentiles,
            cfg.logging_level,
        )

    return jax.jit(evaluate)


class ChunkedLoop:
    """The host loop; a trainer subclasses it and fills in the hooks.

    Subclasses set ``self.state`` (the carried pytrees) and ``self.graphdef`` before calling
    ``__init__`` and implement ``run_chunk`` and ``checkpoint_state``; ``after_logging`` and
    ``extra_events`` add events such as videos.
    """

    state: tuple[Any, ...]
    graphdef: Any

    def __init__(
        self,
        *,
        total_steps: int,
        start_steps: int,
        steps_per_iteration: int,
        eval_env: RLEnv,
        eval_config: EvalConfig,
        seed: int,
        logging_level: LoggingLevel,
        log_fn: LogFn | None,
        checkpoint_fn: Callable[[Any, int], None] | None,
        checkpoint_every_steps: int,
        should_stop: StopFn | None = None,
    ):
        self.total_steps = total_steps
        self.should_stop = should_stop
        self.last_checkpoint_step: int | None = None
        self.start_steps = start_steps
        self.steps_per_iteration = steps_per_iteration
        self.eval_config = eval_config
        self.logging_level = logging_level
        self.log_fn = log_fn
        self.checkpoint_fn = checkpoint_fn
        self.checkpoint_every_steps = checkpoint_every_steps
        iterations = max(0, math.ceil((total_steps - start_steps) / steps_per_iteration))
        self.chunk_length = max(1, min(MAX_ITERATIONS_PER_CALL, iterations))
        self.evaluate = make_evaluator(eval_env, self.graphdef, eval_config)
        self.eval_key = jax.random.fold_in(jax.random.key(seed), 1)
        self.eval_history: list[dict[str, Any]] = []

    def run_chunk(self, n: int) -> dict[str, Any]:
        """Runs ``n`` iterations, updating ``self.state``; returns the stacked metrics."""
        raise NotImplementedError

    def checkpoint_state(self, snapshot: tuple[Any, ...]) -> Any:
        """The object handed to ``checkpoint_fn`` for a copy of ``self.state``."""
        raise NotImplementedError

    def extra_events(self) -> list[int]:
        """Step intervals of the subclass's own events (chunks stop at them too)."""
        return []

    def after_logging(self, before: int, after: int) -> None:
        """Called once a chunk's metrics went to ``log_fn``."""

    def events(self) -> list[int]:
        """The step intervals of every active host-side event."""
        every = [*self.extra_events()]
        if self.eval_config.enabled:
            every.append(self.eval_config.every_steps)
        if self.checkpoint_fn is not None:
            every.append(self.checkpoint_every_steps)
        return every

    def run(self) -> tuple[dict[str, Any], int, int]:
        """Trains to ``total_steps``; returns the last metrics, the steps and iterations.

        When ``should_stop`` answers True after a jitted call (its metrics logged), training
        stops early, after a checkpoint of the state reached (unless one was just written).
        """
        steps, iterations, last_metrics = self.start_steps, 0, {}
        while steps < self.total_steps:
            n = min(
                self.chunk_length,
                math.ceil((self.total_steps - steps) / self.steps_per_iteration),
            )
            for every in self.events():
                n = min(n, iterations_until(steps, every, self.steps_per_iteration))
            start = time.perf_counter()
            metrics = jax.device_get(self.run_chunk(n))
            seconds = time.perf_counter() - start
            after = steps + n * self.steps_per_iteration
            host_metrics = self.host_events(steps, after, final=after >= self.total_steps)
            if self.logging_level & LoggingLevel.THROUGHPUT:
                host_metrics["throughput/env_steps_per_second"] = (after - steps) / seconds
                host_metrics["throughput/seconds_per_iteration"] = seconds / n
            for i in range(n):
                step_metrics = {k: float(v[i]) for k, v in metrics.items()}
                if i == n - 1:
                    step_metrics.update(host_metrics)
                if self.log_fn is not None:
                    self.log_fn(step_metrics, steps + (i + 1) * self.steps_per_iteration)
                last_metrics = step_metrics
            self.after_logging(steps, after)
            steps, iterations = after, iterations + n
            if steps < self.total_steps and self.should_stop is not None and self.should_stop():
                if self.checkpoint_fn is not None and self.last_checkpoint_step != steps:
                    self.save_checkpoint(steps)
                break
        return last_metrics, steps, iterations

    def save_checkpoint(self, step: int) -> None:
        if self.checkpoint_fn is None:
            return
        snapshot = jax.tree.map(jnp.copy, self.state)
        self.checkpoint_fn(self.checkpoint_state(snapshot), step)
        self.last_checkpoint_step = step

    def host_events(self, before: int, after: int, final: bool) -> dict[str, Any]:
        """Evaluation and checkpoint due at ``after``; returns the evaluation's metrics."""
        out: dict[str, Any] = {}
        cfg = self.eval_config
        if cfg.enabled and (final or passed_multiple(before, after, cfg.every_steps)):
            key = jax.random.fold_in(self.eval_key, after)
            evaluation = jax.device_get(self.evaluate(self.state[0], key))
            out = {k: float(v) for k, v in evaluation.items()}
            self.eval_history.append({"step": after, **out})
        every = self.checkpoint_every_steps
        if self.checkpoint_fn is not None and (final or passed_multiple(before, after, every)):
            self.save_checkpoint(after)
        return out
