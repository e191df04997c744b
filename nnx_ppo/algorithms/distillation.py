"""Policy distillation: train a student network to act like a trained teacher.

The public distillation API in one place, and its host loop, ``train_distillation``. The
student's sampled actions drive the envs (it learns on the states it visits itself, as in
DAgger); a deterministic eval-mode copy of the teacher, never updated, acts on the same
observations with its own recurrent state, and its action distributions are the targets.
The loss (``distillation_losses``) is the KL divergence from the teacher's action
distribution to the student's. The pure, jittable pieces are ``distillation_step`` and
``new_distillation_state`` (``distillation_step``) and ``distillation_loss``.

The host loop is ``train_ppo``'s (``host_loop.run_training``): the student and its
optimizer travel in the loop's carry; the teacher's variables are the step's ``extra``, a
separate, non-donated argument of the jitted call (never carried or returned).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
from flax import nnx

from nnx_ppo.algorithms.carry import check_n_envs
from nnx_ppo.algorithms.checkpointing import load_checkpoint, save_checkpoint
from nnx_ppo.algorithms.config import DistillationTrainConfig, DistillationTrainResult, VideoData
from nnx_ppo.algorithms.distillation_losses import distillation_loss
from nnx_ppo.algorithms.distillation_step import (
    distillation_iteration,
    distillation_step,
    eval_copy,
    new_distillation_state,
    unroll_distillation,
)
from nnx_ppo.algorithms.host_loop import (
    Callbacks,
    LogFn,
    PhaseFn,
    Programs,
    StopFn,
    run_training,
)
from nnx_ppo.algorithms.matmul_precision import explicit_matmul_precision
from nnx_ppo.algorithms.program_cache import ProgramCache
from nnx_ppo.algorithms.training import resolve_config, schedule_of
from nnx_ppo.algorithms.types import DistillationState, RLEnv, TrainingState
from nnx_ppo.algorithms.video import check_renderable
from nnx_ppo.envs import randomization
from nnx_ppo.envs.randomization import RandomizationFn
from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.utils import same_shapes

__all__ = [
    "as_training_state",
    "default_config",
    "distillation_iteration",
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


def _check_networks(env: RLEnv, student: StatefulModule, teacher: StatefulModule) -> None:
    """Shape-checks both networks on the env's observation (traced, nothing compiled)."""
    if student is teacher:
        raise ValueError("teacher and student must be different modules (teacher is student)")
    obs = jax.eval_shape(lambda key: env.reset(key).obs, jax.random.key(0))
    obs = jax.tree.map(lambda x: jax.ShapeDtypeStruct((1, *x.shape), x.dtype), obs)

    def distribution_shapes(module: StatefulModule, name: str) -> tuple[Any, Any]:
        graphdef, variables = nnx.split(module)

        def call(v: Any, o: Any) -> Any:
            m: Any = nnx.merge(graphdef, v)
            return m(m.initialize_state(1), o).output.distribution_params

        params = jax.eval_shape(call, variables, obs)
        if not isinstance(params, dict) or not {"loc", "scale"} <= params.keys():
            raise ValueError(
                f"{name} output has no distribution_params 'loc' and 'scale' (a tanh-normal "
                f"policy such as PPONetwork is needed), got {params!r}"
            )
        shape = lambda x: x.shape  # noqa: E731
        return jax.tree.map(shape, params["loc"]), jax.tree.map(shape, params["scale"])

    student_shapes = distribution_shapes(student, "student")
    teacher_shapes = distribution_shapes(teacher, "teacher")
    if student_shapes != teacher_shapes:
        raise ValueError(
            f"teacher action distribution has shape {teacher_shapes[0]} but the student's "
            f"{student_shapes[0]}: were they built for the same env?"
        )


def _check_state(state: DistillationState, teacher: StatefulModule, n_envs: int) -> None:
    """``state`` must hold ``n_envs`` envs and teacher states of ``teacher``'s layout."""
    check_n_envs(state.env_states, n_envs, "config.distillation.n_envs")
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
    student: StatefulModule,
    teacher: StatefulModule,
    config: DistillationTrainConfig | None = None,
    *,
    total_steps: int | None = None,
    seed: int | None = None,
    log_fn: LogFn | None = None,
    checkpoint_fn: CheckpointFn | None = None,
    eval_env: RLEnv | None = None,
    initial_state: DistillationState | None = None,
    should_stop: StopFn | None = None,
    video_fn: Callable[[VideoData], None] | None = None,
    phase_fn: PhaseFn | None = None,
    randomization_fn: RandomizationFn | None = None,
    program_cache: ProgramCache | None = None,
) -> DistillationTrainResult:
    """Distill ``teacher`` into ``student``.

    Training performs whole iterations while the step count is below
    ``config.distillation.total_steps``. Evaluation of the student (deterministic policy,
    ``config.eval``, the same ``eval_rollout`` as PPO's) runs each time the step count
    passes a multiple of ``eval.every_steps`` and once at the end; its metrics
    (``eval/...``) join that iteration's metrics. Checkpoints follow
    ``config.checkpoint_every_steps`` and the end of training. Every iteration reports
    ``losses/distillation`` (see ``distillation_losses``) and the other groups of
    ``config.distillation.logging_level``. With ``config.video.enabled`` and a
    ``video_fn``, the student's deterministic episodes are recorded as in ``train_ppo``.
    Training runs under the same explicit matmul precision as ``train_ppo``'s.

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
        video_fn: As in ``train_ppo``: called with the student's rendered episodes.
        phase_fn: As in ``train_ppo``: told each host-loop phase as it begins.
        randomization_fn: As in ``train_ppo``: each of the ``config.distillation.n_envs``
            envs steps its own variant of ``env``'s model (carried in its state, so a
            resumed run steps the same ones); evaluation uses the nominal model.
        program_cache: As in ``train_ppo``: the jitted training chunk and evaluator are
            loaded from this cache of lowered programs or stored there. Its ``identity``
            must name the env, the student and the teacher network (the teacher's
            variables are an argument of the program, its graph definition is in the key).

    Returns:
        ``DistillationTrainResult`` with the final state, metrics and eval history.

    Raises:
        ValueError: Before anything is compiled, for a config of the wrong type, a teacher
            that is the student, networks without a tanh-normal distribution or with
            different action shapes, or an ``initial_state`` with another number of envs or
            with teacher states of another teacher.
    """
    config = resolve_config(config, DistillationTrainConfig, total_steps, seed)
    video_fn = video_fn if config.video.enabled else None
    if video_fn is not None:
        check_renderable(eval_env or env)  # before anything is compiled
    d = config.distillation
    schedule = schedule_of(config)  # validates config.devices before anything is compiled
    _check_networks(env, student if initial_state is None else initial_state.student, teacher)
    env_states = None if initial_state is None else initial_state.env_states
    train_env = randomization.for_training(env, randomization_fn, d.n_envs, config.seed, env_states)
    if initial_state is None:
        initial_state = new_distillation_state(
            train_env,
            student,
            teacher,
            d.n_envs,
            config.seed,
            d.learning_rate,
            d.gradient_clipping,
            d.weight_decay,
        )
    _check_state(initial_state, teacher, d.n_envs)
    teacher_graphdef, teacher_vars = nnx.split(teacher)

    def step(state: DistillationState, teacher_state: Any) -> tuple[DistillationState, dict]:
        teacher = nnx.merge(teacher_graphdef, teacher_state)
        return distillation_iteration(train_env, teacher, state, d)

    callbacks = Callbacks(log_fn, checkpoint_fn, video_fn, should_stop, phase_fn)
    programs = None
    if program_cache is not None:
        static = {
            "algorithm": "distillation",
            "distillation": {  # the total does not reach the program
                k: v for k, v in dataclasses.asdict(d).items() if k != "total_steps"
            },
            "teacher": repr(teacher_graphdef),
        }
        programs = Programs(program_cache, static, eval_env is None or eval_env is env)
    eval_env = eval_env or env
    with explicit_matmul_precision():
        result = run_training(
            step, initial_state, teacher_vars, eval_env, schedule, callbacks, programs
        )
    assert isinstance(result.state, DistillationState)
    return DistillationTrainResult(**result.fields())


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
    student: StatefulModule,
    teacher: StatefulModule,
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
