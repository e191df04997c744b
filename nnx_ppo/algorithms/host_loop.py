"""The one trainer: the host loop shared by ``train_ppo`` and ``train_distillation``.

Host loop (impure): it decides how many iterations can run before the next host-side event
(evaluation, checkpoint, video, the end; one for the first call, which compiles, so that the
first metrics come as soon as the program runs), runs them in one jitted call of the chunk driver
(``scan_iterations``: a ``lax.scan`` over a pure ``step(carry, extra) -> (carry,
metrics)``), then, in this order: stops with ``NonFiniteError`` at the first iteration
whose losses are not finite (after logging the iterations up to it), evaluates, hands each
iteration's metrics to ``log_fn``, writes the checkpoint that is due, records the video
that is due, and asks ``should_stop``. Metrics are therefore always logged before the
checkpoint of the same iteration is written. ``phase_fn``, when given, is told the name of
each host-loop phase as it begins (``PHASES``): ``training`` before each jitted call (the
first includes the compile), ``evaluating``, ``checkpointing``, ``video``.

What it carries between calls is a ``LoopCarry``; the algorithms differ only in their step
function and in what the step reads beside the carry (``extra``: the teacher's variables
for distillation), never in the loop.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from nnx_ppo.algorithms import sharding
from nnx_ppo.algorithms.carry import State, adopt, merge_state, split_state, traced_step
from nnx_ppo.algorithms.compile_ahead import CompiledAhead
from nnx_ppo.algorithms.config import EvalConfig, VideoConfig, VideoData
from nnx_ppo.algorithms.program_cache import CachedProgram, ProgramCache
from nnx_ppo.algorithms.rollout import eval_rollout
from nnx_ppo.algorithms.types import LoggingLevel, RLEnv
from nnx_ppo.algorithms.video import VideoRecorder

MAX_ITERATIONS_PER_CALL = 32
"""Iterations fused into one jitted call: the training program scans this many, running those
up to the next event and skipping the rest, so one program serves any total and resume point."""

LogFn = Callable[[dict[str, Any], int], None]
StopFn = Callable[[], bool]
CheckpointFn = Callable[[Any, int], None]
VideoFn = Callable[[VideoData], None]
PhaseFn = Callable[[str], None]
PHASES = ("training", "evaluating", "checkpointing", "video")
"""What the host loop tells ``phase_fn``, each as it begins."""
StepFn = Callable[[Any, Any], tuple[Any, dict[str, jax.Array]]]
"""A pure step ``step(state, extra) -> (state, metrics)``: on ``LoopCarry`` for the chunk
driver, on the public state (``TrainingState`` / ``DistillationState``) for
``run_training``."""


class NonFiniteError(RuntimeError):
    """Training produced a non-finite loss (or non-finite parameters before a checkpoint).

    Attributes:
        metric: The metric (``losses/...``) or ``"parameters"``.
        value: The offending value (nan, inf or -inf).
        step: The env step of the iteration it appeared in.
    """

    def __init__(self, metric: str, value: float, step: int):
        super().__init__(
            f"{metric} is {value} at step {step}; training stopped "
            "(the checkpoints written before it are kept)"
        )
        self.metric = metric
        self.value = value
        self.step = step


@dataclasses.dataclass(frozen=True)
class Schedule:
    """When the host loop does what.

    Attributes:
        total_steps: Train while the step count is below this.
        steps_per_iteration: Env steps of one iteration (``n_envs * rollout_length``).
        checkpoint_every_steps: Checkpoint when the step count passes a multiple of this.
        eval: The evaluation schedule and size.
        video: The video schedule (only used with a ``video_fn``).
        seed: Seed of the evaluation and video keys.
        logging_level: The training config's logging level (for ``THROUGHPUT``).
        stop_on_non_finite: Raise ``NonFiniteError`` at the first non-finite loss.
        devices: Devices the env batch is split over (see ``sharding``); 1: the default
            device alone.
    """

    total_steps: int
    steps_per_iteration: int
    checkpoint_every_steps: int
    eval: EvalConfig
    video: VideoConfig
    seed: int
    logging_level: LoggingLevel
    stop_on_non_finite: bool = True
    devices: int = 1


@dataclasses.dataclass(frozen=True)
class Callbacks:
    """The host loop's calls out. ``checkpoint_fn`` receives the public state;
    ``phase_fn`` a name of ``PHASES`` as that phase begins."""

    log_fn: LogFn | None = None
    checkpoint_fn: CheckpointFn | None = None
    video_fn: VideoFn | None = None
    should_stop: StopFn | None = None
    phase_fn: PhaseFn | None = None


@dataclasses.dataclass(frozen=True)
class Programs:
    """Where the host loop's jitted programs come from when they are cached on disk.

    Attributes:
        cache: The program cache (its identity names the env and the network).
        step: What the step function closes over beside them (the algorithm and its config),
            JSON-serializable or with a deterministic ``repr``.
        cache_eval: Whether the evaluator may be cached too: only when the eval env is the
            env that ``cache.identity`` names.
    """

    cache: ProgramCache
    step: dict[str, Any]
    cache_eval: bool = True


@dataclasses.dataclass
class LoopResult:
    """What ``run_training`` returns: the final public state (with the caller's module
    objects, updated in place), the last iteration's metrics, the step count reached, the
    iterations run, and every evaluation's metrics with its step."""

    state: State
    last_metrics: dict[str, Any]
    steps: int
    iterations: int
    eval_history: list[dict[str, Any]]

    def fields(self) -> dict[str, Any]:
        """The keyword arguments of ``TrainResult`` / ``DistillationTrainResult``."""
        return {
            "training_state": self.state,
            "final_metrics": self.last_metrics,
            "eval_history": self.eval_history,
            "total_steps": self.steps,
            "total_iterations": self.iterations,
        }


def iterations_until(steps: int, every: int, steps_per_iteration: int) -> int:
    """Iterations until the step count first passes a multiple of ``every``."""
    target = (steps // every + 1) * every
    return max(1, math.ceil((target - steps) / steps_per_iteration))


def passed_multiple(before: int, after: int, every: int) -> bool:
    """Whether the step count passed a multiple of ``every`` going from before to after."""
    return after // every > before // every


def scan_iterations(
    one_iteration: StepFn, length: int, carry_sharding: Any = None
) -> Callable[..., Any]:
    """The chunk driver: jits ``run(carry, extra, n_active)``, up to ``length`` calls of
    ``one_iteration``.

    ``one_iteration(carry, extra) -> (carry, metrics)`` is a pure step; ``extra`` is read
    only (never donated). The first ``n_active`` iterations run (a traced count, so any count
    up to ``length`` reuses one compilation); metrics come back stacked on a leading
    ``[length]`` axis, zeros past ``n_active``. ``carry`` is donated. With
    ``carry_sharding`` (a carry of shardings, see ``sharding``), the carry comes back laid
    out as it went in.
    """
    run = chunk_driver(one_iteration, length)
    if carry_sharding is None:
        return jax.jit(run, donate_argnums=0)
    return jax.jit(run, donate_argnums=0, out_shardings=(carry_sharding, None))


def chunk_driver(one_iteration: StepFn, length: int) -> Callable[..., Any]:
    """``run(carry, extra, n_active)`` of ``scan_iterations``, not jitted."""

    def run(carry: Any, extra: Any, n_active: jax.Array) -> tuple[Any, dict]:
        # Jitted, the iteration is traced once, for its metrics' shapes and for the scan's body
        # alike (tracing an env's physics step costs seconds; the program is the same).
        iteration = jax.jit(one_iteration)
        metric_shapes = jax.eval_shape(iteration, carry, extra)[1]

        def skip(c: Any) -> tuple[Any, dict]:
            return c, jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), metric_shapes)

        def body(c: Any, i: jax.Array) -> tuple[Any, dict]:
            return jax.lax.cond(i < n_active, lambda c: iteration(c, extra), skip, c)

        return jax.lax.scan(body, carry, jnp.arange(length))

    return run


def make_evaluator(env: RLEnv, graphdef: Any, cfg: EvalConfig) -> Callable[..., Any]:
    """Jits ``evaluate(module_state, key)``: ``eval_rollout`` of the policy in
    ``nnx.merge(graphdef, module_state)[0]`` (the state of ``(policy, optimizer)``)."""
    return jax.jit(evaluation_fn(env, graphdef, cfg))


def evaluation_fn(env: RLEnv, graphdef: Any, cfg: EvalConfig) -> Callable[..., Any]:
    """``evaluate(module_state, key)`` of ``make_evaluator``, not jitted."""

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

    return evaluate


def eval_static(cfg: EvalConfig) -> dict[str, Any]:
    """The fields of an eval config that reach the evaluator's program."""
    return {
        "n_envs": cfg.n_envs,
        "max_episode_length": cfg.max_episode_length,
        "logging_percentiles": cfg.logging_percentiles,
        "logging_level": cfg.logging_level.value,
    }


@jax.jit
def _all_finite(tree: Any) -> jax.Array:
    leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.floating)]
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves] or [jnp.array(True)]))


def first_non_finite(metrics: dict[str, np.ndarray], n: int) -> tuple[int, str] | None:
    """``(iteration, key)`` of the first non-finite ``losses/*`` value among the first
    ``n`` iterations of stacked metrics, or None."""
    for i in range(n):
        for key in sorted(k for k in metrics if k.startswith("losses/")):
            if not math.isfinite(float(metrics[key][i])):
                return i, key
    return None


def run_training(
    step: StepFn,
    initial_state: State,
    extra: Any,
    eval_env: RLEnv,
    schedule: Schedule,
    callbacks: Callbacks,
    programs: Programs | None = None,
) -> LoopResult:
    """Trains ``initial_state`` to ``schedule.total_steps`` with ``step(state, extra) ->
    (state, metrics)`` on public states (traced, ``extra`` read only); see the module
    docstring for the order of events. With ``should_stop`` answering True after a jitted
    call, training stops there, after a checkpoint of the state reached. With ``programs``,
    the training chunk and the evaluator are loaded from (or stored in) a program cache
    (one device only; data-parallel training always traces)."""
    return _HostLoop(step, initial_state, extra, eval_env, schedule, callbacks, programs).run()


class _HostLoop:
    """The host loop's state between jitted calls (see ``run_training``)."""

    def __init__(
        self,
        step: StepFn,
        initial_state: State,
        extra: Any,
        eval_env: RLEnv,
        schedule: Schedule,
        callbacks: Callbacks,
        programs: Programs | None = None,
    ):
        self.initial_state = initial_state
        self.graphdef, self.carry = split_state(initial_state)
        self.extra = extra
        layout = None
        if schedule.devices > 1:  # data parallel: envs split over a mesh, the rest replicated
            mesh = sharding.make_mesh(schedule.devices)
            layout = sharding.carry_shardings(mesh, self.carry)
            self.carry = jax.device_put(self.carry, layout)
            self.extra = sharding.replicated(mesh, extra)
        self.schedule = schedule
        self.callbacks = callbacks
        self.start_steps = int(initial_state.steps_taken)
        # Always the maximum, whatever the steps left (``n_active`` is traced): a resumed run,
        # or one with another total, runs the program the first one compiled, from the
        # persistent compilation cache or the program cache.
        self.chunk_length = MAX_ITERATIONS_PER_CALL
        self.train_chunk = scan_iterations(
            traced_step(self.graphdef, step), self.chunk_length, layout
        )
        self.evaluate = make_evaluator(eval_env, self.graphdef, schedule.eval)
        if programs is not None and layout is None:
            self.use_program_cache(step, eval_env, programs)
        self.eval_key = jax.random.fold_in(jax.random.key(schedule.seed), 1)
        self.video_key = jax.random.fold_in(jax.random.key(schedule.seed), 2)
        self.record_video: VideoRecorder | None = None
        if callbacks.video_fn is not None:
            v = schedule.video
            self.record_video = VideoRecorder(
                eval_env, self.graphdef, v.episode_length, v.render_kwargs
            )
        self.eval_history: list[dict[str, Any]] = []
        self.last_checkpoint_step: int | None = None

    def use_program_cache(self, step: StepFn, eval_env: RLEnv, programs: Programs) -> None:
        """The training chunk (and, where allowed, the evaluator) from the program cache."""
        graph = repr(self.graphdef)
        run = chunk_driver(traced_step(self.graphdef, step), self.chunk_length)
        static = {"step": programs.step, "length": self.chunk_length, "graphdef": graph}
        self.train_chunk = programs.cache.jit("train_chunk", run, static, donate_argnums=0)
        if programs.cache_eval:
            evaluate = evaluation_fn(eval_env, self.graphdef, self.schedule.eval)
            static = {"eval": eval_static(self.schedule.eval), "graphdef": graph}
            self.evaluate = programs.cache.jit("evaluate", evaluate, static)

    def events(self) -> list[int]:
        """The step intervals of every active host-side event."""
        s, every = self.schedule, []
        if s.eval.enabled:
            every.append(s.eval.every_steps)
        if self.callbacks.checkpoint_fn is not None:
            every.append(s.checkpoint_every_steps)
        if self.record_video is not None:
            every.append(s.video.every_steps)
        return every

    def chunk_size(self, steps: int, first: bool = False) -> int:
        """Iterations of the next jitted call: up to the next event or the end; one for the
        ``first`` call, which compiles the program, so that its metrics show as soon as
        it runs rather than ``chunk_length`` iterations later (one program serves both)."""
        per = self.schedule.steps_per_iteration
        n = min(self.chunk_length, math.ceil((self.schedule.total_steps - steps) / per))
        if first:
            n = 1
        for every in self.events():
            n = min(n, iterations_until(steps, every, per))
        return n

    def run(self) -> LoopResult:
        s, per = self.schedule, self.schedule.steps_per_iteration
        steps, iterations, last_metrics = self.start_steps, 0, {}
        if steps < s.total_steps:
            self.compile_ahead()
        while steps < s.total_steps:
            n = self.chunk_size(steps, first=iterations == 0)
            self.phase("training")
            start = time.perf_counter()
            self.carry, stacked = self.train_chunk(self.carry, self.extra, jnp.asarray(n))
            metrics = jax.device_get(stacked)
            seconds = time.perf_counter() - start
            after = steps + n * per
            bad = first_non_finite(metrics, n) if s.stop_on_non_finite else None
            if bad is not None:
                i, key = bad
                self.log(metrics, i + 1, steps, {})
                raise NonFiniteError(key, float(metrics[key][i]), steps + (i + 1) * per)
            final = after >= s.total_steps
            host_metrics = self.evaluation(steps, after, final)
            if s.logging_level & LoggingLevel.THROUGHPUT:
                host_metrics["throughput/env_steps_per_second"] = (after - steps) / seconds
                host_metrics["throughput/seconds_per_iteration"] = seconds / n
            last_metrics = self.log(metrics, n, steps, host_metrics)
            if final or passed_multiple(steps, after, s.checkpoint_every_steps):
                self.save_checkpoint(after)
            self.video(steps, after)
            steps, iterations = after, iterations + n
            stop = self.callbacks.should_stop
            if steps < s.total_steps and stop is not None and stop():
                if self.last_checkpoint_step != steps:
                    self.save_checkpoint(steps)
                break
        final_state = adopt(self.initial_state, merge_state(self.graphdef, self.carry))
        return LoopResult(final_state, last_metrics, steps, iterations, self.eval_history)

    def compile_ahead(self) -> None:
        """Lowers the training chunk and the evaluator here and compiles each in a background
        thread (``compile_ahead``): the evaluator's trace runs while the chunk compiles, its
        compile after the chunk's (while the first iterations run), and the first evaluation
        need not wait for a compile of its own. Before the first call, which donates the
        carry. (Data-parallel training keeps its chunk's plain jit, laid out by its
        shardings.)"""
        if self.schedule.devices == 1:
            args = (self.carry, self.extra, jnp.asarray(1))
            if isinstance(self.train_chunk, CachedProgram):
                self.train_chunk.compile_ahead(*args)
            else:
                self.train_chunk = CompiledAhead(self.train_chunk, *args)
        if not self.schedule.eval.enabled:
            return
        key = jax.random.fold_in(self.eval_key, 0)
        if isinstance(self.evaluate, CachedProgram):
            self.evaluate.compile_ahead(self.carry.modules, key)
        else:
            self.evaluate = CompiledAhead(self.evaluate, self.carry.modules, key)

    def phase(self, name: str) -> None:
        if self.callbacks.phase_fn is not None:
            self.callbacks.phase_fn(name)

    def log(
        self, metrics: dict[str, Any], n: int, steps: int, host_metrics: dict[str, Any]
    ) -> dict[str, Any]:
        """Hands the first ``n`` iterations' metrics to ``log_fn`` (``host_metrics`` join
        the last); returns the last iteration's."""
        last: dict[str, Any] = {}
        for i in range(n):
            last = {k: float(v[i]) for k, v in metrics.items()}
            if i == n - 1:
                last.update(host_metrics)
            if self.callbacks.log_fn is not None:
                self.callbacks.log_fn(last, steps + (i + 1) * self.schedule.steps_per_iteration)
        return last

    def evaluation(self, before: int, after: int, final: bool) -> dict[str, Any]:
        """The evaluation due at ``after`` (its metrics), or nothing."""
        cfg = self.schedule.eval
        if not cfg.enabled or not (final or passed_multiple(before, after, cfg.every_steps)):
            return {}
        self.phase("evaluating")
        key = jax.random.fold_in(self.eval_key, after)
        evaluation = jax.device_get(self.evaluate(self.carry.modules, key))
        out = {k: float(v) for k, v in evaluation.items()}
        self.eval_history.append({"step": after, **out})
        return out

    def save_checkpoint(self, step: int) -> None:
        """Hands a copy of the state at ``step`` to ``checkpoint_fn``. With the non-finite
        guard, non-finite parameters raise ``NonFiniteError`` instead of being written."""
        checkpoint_fn = self.callbacks.checkpoint_fn
        if checkpoint_fn is None:
            return
        if self.schedule.stop_on_non_finite and not bool(_all_finite(self.carry.modules)):
            raise NonFiniteError("parameters", math.nan, step)
        self.phase("checkpointing")
        snapshot = jax.tree.map(jnp.copy, self.carry)
        checkpoint_fn(merge_state(self.graphdef, snapshot), step)
        self.last_checkpoint_step = step

    def video(self, before: int, after: int) -> None:
        """Renders and hands over the video due at ``after``, after that step's metrics went
        to ``log_fn`` (a logger that needs increasing steps, such as W&B, gets the video at
        ``after`` after the metrics of the steps before it)."""
        every = self.schedule.video.every_steps
        if self.record_video is None or not passed_multiple(before, after, every):
            return
        assert self.callbacks.video_fn is not None
        self.phase("video")
        key = jax.random.fold_in(self.video_key, after)
        self.callbacks.video_fn(self.record_video(self.carry.modules, key, after))
