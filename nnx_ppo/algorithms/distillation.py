"""Policy distillation: train a student network to act like a trained teacher.

The public distillation API in one place, and its host loop, ``train_distillation``. The
student's sampled actions drive the envs (it learns on the states it visits itself, as in
DAgger); a deterministic eval-mode copy of the teacher, never updated, acts on the same
observations with its own recurrent state, and its action distributions are the targets.
The loss (``distillation_losses``) is the KL divergence from the teacher's action
distribution to the student's. The pure, jittable pieces are ``distillation_step`` and
``new_distillation_state`` (``distillation_step``) and ``distillation_loss``.

Host loop (impure), as ``train_ppo``'s: it decides how many iterations can run before the
next host-side event (evaluation, checkpoint, the end), runs them in one jitted call (a
``lax.scan`` over ``distillation_step``), hands each iteration's metrics to ``log_fn`` in
order and performs the event. The student and its optimizer are split once into a graph
definition and a state pytree and merged inside the jitted call; the teacher's variables
are a separate, non-donated argument of that call (never part of what is carried or
returned).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.algorithms.checkpointing import save_checkpoint
from nnx_ppo.algorithms.config import DistillationTrainConfig, DistillationTrainResult
from nnx_ppo.algorithms.distillation_losses import distillation_loss
from nnx_ppo.algorithms.distillation_step import (
    distillation_step,
    eval_copy,
    new_distillation_state,
    unroll_distillation,
)
from nnx_ppo.algorithms.rollout import eval_rollout
from nnx_ppo.algorithms.training import MAX_ITERATIONS_PER_CALL, iterations_until, passed_multiple
from nnx_ppo.algorithms.types import DistillationState, LoggingLevel, RLEnv, TrainingState

__all__ = [
    "as_training_state",
    "default_config",
    "distillation_loss",
    "distillation_step",
    "eval_copy",
    "make_distillation_checkpoint_fn",
    "new_distillation_state",
    "train_distillation",
    "unroll_distillation",
]

LogFn = Callable[[dict[str, Any], int], None]
CheckpointFn = Callable[[DistillationState, int], None]


def default_config() -> DistillationTrainConfig:
    """Return the default distillation configuration."""
    return DistillationTrainConfig()


def _resolve_config(
    config: DistillationTrainConfig | None, total_steps: int | None, seed: int | None
) -> DistillationTrainConfig:
    config = default_config() if config is None else config
    if not isinstance(config, DistillationTrainConfig):
        raise ValueError(f"config must be a DistillationTrainConfig, got {type(config).__name__}")
    if total_steps is not None:  # replace() validates the new value
        d = dataclasses.replace(config.distillation, total_steps=total_steps)
        config = dataclasses.replace(config, distillation=d)
    if seed is not None:
        config = dataclasses.replace(config, seed=seed)
    return config


def _check_networks(env: RLEnv, student: nnx.Module, teacher: nnx.Module) -> None:
    """Shape-checks both networks on the env's observation (traced, nothing compiled)."""
    if student is teacher:
        raise ValueError("teacher and student must be different modules (teacher is student)")
    obs = jax.eval_shape(lambda key: env.reset(key).obs, jax.random.key(0))
    obs = jax.tree.map(lambda x: jax.ShapeDtypeStruct((1, *x.shape), x.dtype), obs)

    def distribution_shapes(module: nnx.Module, name: str) -> tuple[Any, Any]:
        graphdef, variables = nnx.split(module)

        def call(v: Any, o: Any) -> Any:
            m = nnx.merge(graphdef, v)
            return m(m.initialize_state(1), o).output.distribution_params

        params = jax.eval_shape(call, variables, obs)
        if not isinstance(params, dict) or not {"loc", "scale"} <= params.keys():
            raise ValueError(
                f"{name} output has no distribution_params 'loc' and 'scale' (a tanh-normal "
                f"policy such as PPONetwork is needed), got {params!r}"
            )
        return params["loc"].shape, params["scale"].shape

    student_shapes = distribution_shapes(student, "student")
    teacher_shapes = distribution_shapes(teacher, "teacher")
    if student_shapes != teacher_shapes:
        raise ValueError(
            f"teacher action distribution has shape {teacher_shapes[0]} but the student's "
            f"{student_shapes[0]}: were they built for the same env?"
        )


def _check_state(state: DistillationState, teacher: nnx.Module, n_envs: int) -> None:
    """``state`` must hold ``n_envs`` envs and teacher states of ``teacher``'s layout."""
    leaves = jax.tree.leaves(state.env_states)
    if leaves and leaves[0].shape[:1] != (n_envs,):
        raise ValueError(
            f"initial_state holds {leaves[0].shape[0]} envs but "
            f"config.distillation.n_envs is {n_envs}"
        )
    actual = state.teacher_states
    expected = jax.eval_shape(lambda: teacher.initialize_state(n_envs))
    same = jax.tree.structure(actual) == jax.tree.structure(expected) and all(
        a.shape == b.shape
        for a, b in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True)
    )
    if not same:
        shapes = jax.tree.map(lambda x: x.shape, (actual, expected))
        raise ValueError(
            f"initial_state.teacher_states {shapes[0]} do not match the teacher's "
            f"initialize_state({n_envs}) {shapes[1]} (another teacher?)"
        )


def train_distillation(
    env: RLEnv,
    student: nnx.Module,
    teacher: nnx.Module,
    config: DistillationTrainConfig | None = None,
    *,
    total_steps: int | None = None,
    seed: int | None = None,
    log_fn: LogFn | None = None,
    checkpoint_fn: CheckpointFn | None = None,
    eval_env: RLEnv | None = None,
    initial_state: DistillationState | None = None,
) -> DistillationTrainResult:
    """Distill ``teacher`` into ``student``.

    Training performs whole iterations while the step count is below
    ``config.distillation.total_steps``. Evaluation of the student (deterministic policy,
    ``config.eval``, the same ``eval_rollout`` as PPO's) runs each time the step count
    passes a multiple of ``eval.every_steps`` and once at the end; its metrics
    (``eval/...``) join that iteration's metrics. Checkpoints follow
    ``config.checkpoint_every_steps`` and the end of training. Every iteration reports
    ``losses/distillation`` (see ``distillation_losses``) and the other groups of
    ``config.distillation.logging_level``. Video recording is not implemented
    (``config.video`` is ignored).

    Args:
        env: Training environment.
        student: The network to train (a ``PPONetwork`` or another ``StatefulModule`` whose
            output has ``distribution_params`` ``loc`` and ``scale``); trained in place.
        teacher: The trained network to imitate, same action distribution shape. Only an
            eval-mode copy of it is run; it is never updated.
        config: Distillation configuration. If None, uses ``default_config()``.
        total_steps: Override ``config.distillation.total_steps``.
        seed: Override ``config.seed``.
        log_fn: Called with ``(metrics_dict, step)`` after each iteration.
        checkpoint_fn: Called with ``(distillation_state, step)`` at
            ``config.checkpoint_every_steps`` intervals (see
            ``make_distillation_checkpoint_fn``).
        eval_env: Environment for evaluation rollouts. If None, uses ``env``.
        initial_state: Resume from an existing ``DistillationState`` (its student and
            optimizer are the ones trained). If None, creates a new one.

    Returns:
        ``DistillationTrainResult`` with the final state, metrics and eval history.

    Raises:
        ValueError: Before anything is compiled, for a config of the wrong type, a teacher
            that is the student, networks without a tanh-normal distribution or with
            different action shapes, or an ``initial_state`` with another number of envs or
            with teacher states of another teacher.
    """
    config = _resolve_config(config, total_steps, seed)
    d = config.distillation
    _check_networks(env, student if initial_state is None else initial_state.student, teacher)
    if initial_state is None:
        initial_state = new_distillation_state(
            env,
            student,
            teacher,
            d.n_envs,
            config.seed,
            d.learning_rate,
            d.gradient_clipping,
            d.weight_decay,
        )
    _check_state(initial_state, teacher, d.n_envs)
    loop = _HostLoop(env, eval_env or env, teacher, initial_state, config, log_fn, checkpoint_fn)
    return loop.run()


def as_training_state(state: DistillationState) -> TrainingState:
    """The student's side of ``state`` as a ``TrainingState`` (the teacher's states dropped).

    This is what ``make_distillation_checkpoint_fn`` saves, so a distilled student loads
    like any PPO policy (``load_checkpoint``, ``teacher.load_teacher``).
    """
    return TrainingState(
        networks=state.student,
        network_states=state.student_states,
        env_states=state.env_states,
        optimizer=state.optimizer,
        rng_key=state.rng_key,
        steps_taken=state.steps_taken,
    )


def make_distillation_checkpoint_fn(directory: str) -> CheckpointFn:
    """A ``checkpoint_fn`` for ``train_distillation`` writing ``make_checkpoint_fn``'s layout.

    Each checkpoint holds the student, its optimizer, the student's and envs' states, the
    key and the step (``as_training_state``); no config (``metadata.pkl`` admits only a
    ``TrainConfig``) and not the teacher's per-env states. To resume, load it with
    ``load_checkpoint`` into a template student and optimizer and build a
    ``DistillationState`` from it with ``teacher.initialize_state(n_envs)`` as
    ``teacher_states`` (for a recurrent teacher, episodes in progress then restart its
    memory).
    """

    def checkpoint_fn(state: DistillationState, step: int) -> None:
        save_checkpoint(directory, as_training_state(state), step)

    return checkpoint_fn


@dataclasses.dataclass
class _Carry:
    """What the jitted loop carries, as plain pytrees, and how to rebuild the objects."""

    graphdef: Any
    state: tuple[Any, ...]

    @classmethod
    def from_state(cls, s: DistillationState) -> _Carry:
        graphdef, module_state = nnx.split((s.student, s.optimizer))
        state = (module_state, s.student_states, s.teacher_states, s.env_states, s.rng_key)
        state += (s.steps_taken,)
        return cls(graphdef, jax.tree.map(jnp.copy, state))  # donation must not hit the caller

    def distillation_state(self, state: tuple[Any, ...] | None = None) -> DistillationState:
        return _unpack(self.graphdef, state or self.state)


def _unpack(graphdef: Any, state: tuple[Any, ...]) -> DistillationState:
    module_state, student_states, teacher_states, env_states, rng_key, steps = state
    student, optimizer = nnx.merge(graphdef, module_state)
    return DistillationState(
        student, student_states, teacher_states, env_states, optimizer, rng_key, steps
    )


def _make_train_chunk(
    env: RLEnv, graphdef: Any, teacher_graphdef: Any, step_kwargs: dict[str, Any], length: int
):
    """A jitted function running up to ``length`` distillation iterations.

    ``run(state, teacher_vars, n_active)`` performs the first ``n_active`` iterations (a
    traced count, so any count up to ``length`` reuses one compilation) and returns the new
    state and the per-iteration metrics stacked on a leading ``[length]`` axis.
    ``teacher_vars`` is only read.
    """

    def one_iteration(state: tuple[Any, ...], teacher_vars: Any) -> tuple[tuple, dict]:
        teacher = nnx.merge(teacher_graphdef, teacher_vars)
        s, metrics = distillation_step(env, teacher, _unpack(graphdef, state), **step_kwargs)
        module_state = nnx.state((s.student, s.optimizer))
        new = (module_state, s.student_states, s.teacher_states, s.env_states, s.rng_key)
        return (*new, s.steps_taken), metrics

    def run(state: tuple[Any, ...], teacher_vars: Any, n_active: jax.Array) -> tuple:
        metric_shapes = jax.eval_shape(one_iteration, state, teacher_vars)[1]

        def skip(s: tuple[Any, ...]) -> tuple[tuple[Any, ...], dict]:
            return s, jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), metric_shapes)

        def body(s: tuple[Any, ...], i: jax.Array) -> tuple[tuple[Any, ...], dict]:
            iterate = lambda s: one_iteration(s, teacher_vars)  # noqa: E731
            return jax.lax.cond(i < n_active, iterate, skip, s)

        return jax.lax.scan(body, state, jnp.arange(length))

    return jax.jit(run, donate_argnums=0)


def _make_evaluator(env: RLEnv, graphdef: Any, config: DistillationTrainConfig):
    cfg = config.eval

    def evaluate(module_state: Any, key: jax.Array) -> dict[str, jax.Array]:
        student, _ = nnx.merge(graphdef, module_state)
        return eval_rollout(
            env,
            student,
            cfg.n_envs,
            cfg.max_episode_length,
            key,
            cfg.logging_percentiles,
            cfg.logging_level,
        )

    return jax.jit(evaluate)


class _HostLoop:
    """Host loop: jitted chunks of distillation iterations with host-side events between."""

    def __init__(
        self,
        env: RLEnv,
        eval_env: RLEnv,
        teacher: nnx.Module,
        initial_state: DistillationState,
        config: DistillationTrainConfig,
        log_fn: LogFn | None,
        checkpoint_fn: CheckpointFn | None,
    ):
        d = config.distillation
        self.config = config
        self.initial_state = initial_state
        self.log_fn = log_fn
        self.checkpoint_fn = checkpoint_fn
        self.carry = _Carry.from_state(initial_state)
        teacher_graphdef, self.teacher_vars = nnx.split(teacher)
        self.steps_per_iteration = d.n_envs * d.rollout_length
        step_kwargs = {
            "n_envs": d.n_envs,
            "rollout_length": d.rollout_length,
            "n_epochs": d.n_epochs,
            "n_minibatches": d.n_minibatches,
            "logging_level": d.logging_level,
            "logging_percentiles": d.logging_percentiles,
        }
        steps = int(initial_state.steps_taken)
        total_iterations = max(0, math.ceil((d.total_steps - steps) / self.steps_per_iteration))
        self.chunk_length = max(1, min(MAX_ITERATIONS_PER_CALL, total_iterations))
        self.train_chunk = _make_train_chunk(
            env, self.carry.graphdef, teacher_graphdef, step_kwargs, self.chunk_length
        )
        self.evaluate = _make_evaluator(eval_env, self.carry.graphdef, config)
        self.eval_key = jax.random.fold_in(jax.random.key(config.seed), 1)
        self.eval_history: list[dict[str, Any]] = []

    def _events(self) -> list[int]:
        """The step intervals of the host-side events that are active."""
        every = []
        if self.config.eval.enabled:
            every.append(self.config.eval.every_steps)
        if self.checkpoint_fn is not None:
            every.append(self.config.checkpoint_every_steps)
        return every

    def run(self) -> DistillationTrainResult:
        total = self.config.distillation.total_steps
        steps = int(self.initial_state.steps_taken)
        iterations, last_metrics = 0, {}
        while steps < total:
            n = min(self.chunk_length, math.ceil((total - steps) / self.steps_per_iteration))
            for every in self._events():
                n = min(n, iterations_until(steps, every, self.steps_per_iteration))
            start = time.perf_counter()
            self.carry.state, metrics = self.train_chunk(
                self.carry.state, self.teacher_vars, jnp.asarray(n)
            )
            metrics = jax.device_get(metrics)
            seconds = time.perf_counter() - start
            after = steps + n * self.steps_per_iteration
            host_metrics = self._host_events(steps, after, final=after >= total)
            if self.config.distillation.logging_level & LoggingLevel.THROUGHPUT:
                host_metrics["throughput/env_steps_per_second"] = (after - steps) / seconds
                host_metrics["throughput/seconds_per_iteration"] = seconds / n
            for i in range(n):
                step_metrics = {k: float(v[i]) for k, v in metrics.items()}
                if i == n - 1:
                    step_metrics.update(host_metrics)
                if self.log_fn is not None:
                    self.log_fn(step_metrics, steps + (i + 1) * self.steps_per_iteration)
                last_metrics = step_metrics
            steps, iterations = after, iterations + n
        return self._result(last_metrics, steps, iterations)

    def _host_events(self, before: int, after: int, final: bool) -> dict[str, Any]:
        """Evaluation and checkpoint due at ``after``; returns the evaluation's metrics."""
        out: dict[str, Any] = {}
        eval_cfg = self.config.eval
        if eval_cfg.enabled and (final or passed_multiple(before, after, eval_cfg.every_steps)):
            key = jax.random.fold_in(self.eval_key, after)
            evaluation = jax.device_get(self.evaluate(self.carry.state[0], key))
            out = {k: float(v) for k, v in evaluation.items()}
            self.eval_history.append({"step": after, **out})
        every = self.config.checkpoint_every_steps
        if self.checkpoint_fn is not None and (final or passed_multiple(before, after, every)):
            snapshot = jax.tree.map(jnp.copy, self.carry.state)
            self.checkpoint_fn(self.carry.distillation_state(snapshot), after)
        return out

    def _result(
        self, last_metrics: dict[str, Any], steps: int, iterations: int
    ) -> DistillationTrainResult:
        final = self.carry.distillation_state()
        # The caller's modules take the trained values (their own buffers were never donated).
        nnx.update(
            (self.initial_state.student, self.initial_state.optimizer),
            nnx.state((final.student, final.optimizer)),
        )
        training_state = final.replace(
            student=self.initial_state.student, optimizer=self.initial_state.optimizer
        )
        return DistillationTrainResult(
            training_state=training_state,
            final_metrics=last_metrics,
            eval_history=self.eval_history,
            total_steps=steps,
            total_iterations=iterations,
        )
