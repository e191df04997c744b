"""Policy distillation: train a student network to act like a trained teacher.

The public distillation API in one place, and its host loop, ``train_distillation``. The
student's sampled actions drive the envs (it learns on the states it visits itself, as in
DAgger); a deterministic eval-mode copy of the teacher, never updated, acts on the same
observations with its own recurrent state, and its action distributions are the targets.
The loss (``distillation_losses``) is the KL divergence from the teacher's action
distribution to the student's. The pure, jittable pieces are ``distillation_step`` and
``new_distillation_state`` (``distillation_step``) and ``distillation_loss``.

The host loop is ``train_ppo``'s (``host_loop.ChunkedLoop``). The student and its
optimizer are split once into a graph definition and a state pytree and merged inside the
jitted call; the teacher's variables are a separate, non-donated argument of that call
(never part of what is carried or returned).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.algorithms.checkpointing import load_checkpoint, save_checkpoint
from nnx_ppo.algorithms.config import DistillationTrainConfig, DistillationTrainResult
from nnx_ppo.algorithms.distillation_losses import distillation_loss
from nnx_ppo.algorithms.distillation_step import (
    distillation_step,
    eval_copy,
    new_distillation_state,
    unroll_distillation,
)
from nnx_ppo.algorithms.host_loop import ChunkedLoop, LogFn, StopFn, scan_iterations
from nnx_ppo.algorithms.types import DistillationState, RLEnv, TrainingState
from nnx_ppo.utils import same_shapes

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
    if not same_shapes(actual, expected):
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
    should_stop: StopFn | None = None,
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
        should_stop: As in ``train_ppo``: asked after each jitted call; True stops
            training there, after a checkpoint.

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
    loop = _HostLoop(
        env, eval_env or env, teacher, initial_state, config, log_fn, checkpoint_fn, should_stop
    )
    return loop.train()


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


def load_distillation_state(
    path: str,
    env: RLEnv,
    student: nnx.Module,
    teacher: nnx.Module,
    config: DistillationTrainConfig,
) -> DistillationState:
    """A ``DistillationState`` to resume from a ``make_distillation_checkpoint_fn``
    checkpoint: the student, its optimizer, its and the envs' states, the key and the step
    from ``path``; the teacher's per-env states fresh (``teacher.initialize_state``), since
    checkpoints do not hold them. ``student`` is the template the checkpoint loads into.

    Raises:
        FileNotFoundError: If ``path`` is not a checkpoint.
        ValueError: If the checkpoint does not hold this student or this many envs.
    """
    d = config.distillation
    template = new_distillation_state(
        env,
        student,
        teacher,
        d.n_envs,
        config.seed,
        d.learning_rate,
        d.gradient_clipping,
        d.weight_decay,
    )
    restored = load_checkpoint(path, template.student, template.optimizer)["training_state"]
    return DistillationState(
        student=restored.networks,
        student_states=restored.network_states,
        teacher_states=template.teacher_states,
        env_states=restored.env_states,
        optimizer=restored.optimizer,
        rng_key=restored.rng_key,
        steps_taken=restored.steps_taken,
    )


def _split(s: DistillationState) -> tuple[Any, tuple[Any, ...]]:
    """``(graphdef, carried pytrees)`` of a state; the pytrees are copies, so that donating
    them to the jitted loop never deletes the caller's buffers."""
    graphdef, module_state = nnx.split((s.student, s.optimizer))
    state = (module_state, s.student_states, s.teacher_states, s.env_states, s.rng_key)
    return graphdef, jax.tree.map(jnp.copy, (*state, s.steps_taken))


def _unpack(graphdef: Any, state: tuple[Any, ...]) -> DistillationState:
    module_state, student_states, teacher_states, env_states, rng_key, steps = state
    student, optimizer = nnx.merge(graphdef, module_state)
    return DistillationState(
        student, student_states, teacher_states, env_states, optimizer, rng_key, steps
    )


def _one_iteration(env: RLEnv, graphdef: Any, teacher_graphdef: Any, step_kwargs: dict):
    """``distillation_step`` on the carried pytrees, for ``scan_iterations``; the extra
    argument is the teacher's variables (read only)."""

    def one_iteration(state: tuple[Any, ...], teacher_vars: Any) -> tuple[tuple, dict]:
        teacher = nnx.merge(teacher_graphdef, teacher_vars)
        s, metrics = distillation_step(env, teacher, _unpack(graphdef, state), **step_kwargs)
        module_state = nnx.state((s.student, s.optimizer))
        new = (module_state, s.student_states, s.teacher_states, s.env_states, s.rng_key)
        return (*new, s.steps_taken), metrics

    return one_iteration


class _HostLoop(ChunkedLoop):
    """Distillation's host loop: jitted chunks of ``distillation_step``."""

    def __init__(
        self,
        env: RLEnv,
        eval_env: RLEnv,
        teacher: nnx.Module,
        initial_state: DistillationState,
        config: DistillationTrainConfig,
        log_fn: LogFn | None,
        checkpoint_fn: CheckpointFn | None,
        should_stop: StopFn | None = None,
    ):
        d = config.distillation
        self.initial_state = initial_state
        self.graphdef, self.state = _split(initial_state)
        super().__init__(
            total_steps=d.total_steps,
            start_steps=int(initial_state.steps_taken),
            steps_per_iteration=d.n_envs * d.rollout_length,
            eval_env=eval_env,
            eval_config=config.eval,
            seed=config.seed,
            logging_level=d.logging_level,
            log_fn=log_fn,
            checkpoint_fn=checkpoint_fn,
            checkpoint_every_steps=config.checkpoint_every_steps,
            should_stop=should_stop,
        )
        teacher_graphdef, self.teacher_vars = nnx.split(teacher)
        step_kwargs = {
            "n_envs": d.n_envs,
            "rollout_length": d.rollout_length,
            "n_epochs": d.n_epochs,
            "n_minibatches": d.n_minibatches,
            "logging_level": d.logging_level,
            "logging_percentiles": d.logging_percentiles,
        }
        one_iteration = _one_iteration(env, self.graphdef, teacher_graphdef, step_kwargs)
        self.train_chunk = scan_iterations(one_iteration, self.chunk_length)

    def run_chunk(self, n: int) -> dict[str, Any]:
        self.state, metrics = self.train_chunk(self.state, self.teacher_vars, jnp.asarray(n))
        return metrics

    def checkpoint_state(self, snapshot: tuple[Any, ...]) -> DistillationState:
        return _unpack(self.graphdef, snapshot)

    def train(self) -> DistillationTrainResult:
        last_metrics, steps, iterations = self.run()
        final = _unpack(self.graphdef, self.state)
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
