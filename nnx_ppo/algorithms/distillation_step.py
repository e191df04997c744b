"""One distillation iteration as a pure function, its rollout, and the state it starts from.

The student acts (sampling from its policy, so that it is trained on the states it visits
itself, as in DAgger); the teacher, a deterministic copy in eval mode, is run on the same
observations and its action distribution is recorded as the target. Both keep recurrent
state, and both states are reset exactly where an episode ends.
"""

from __future__ import annotations

from typing import Any

import jax
from flax import nnx

from nnx_ppo.algorithms.config import DistillationConfig
from nnx_ppo.algorithms.distillation_losses import distillation_loss
from nnx_ppo.algorithms.metrics import compute_metrics, log_weight_stats
from nnx_ppo.algorithms.module_scan import eval_copy as eval_copy
from nnx_ppo.algorithms.module_scan import unroll
from nnx_ppo.algorithms.rollout import (
    end_episodes,
    rollout_start_states,
    tree_where,
    truncation_flags,
)
from nnx_ppo.algorithms.step import advance, new_training_state, optimize
from nnx_ppo.algorithms.types import (
    DistillationState,
    DistillationTransition,
    LoggingLevel,
    RLEnv,
    Transition,
)
from nnx_ppo.envs.chunked import step_envs
from nnx_ppo.networks.actor_critic import update_statistics
from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.networks.types import StatefulOutput


def new_distillation_state(
    env: RLEnv,
    student: StatefulModule,
    teacher: StatefulModule,
    n_envs: int,
    seed: int,
    learning_rate: float = 0.0001,
    gradient_clipping: float | None = None,
    weight_decay: float | None = None,
) -> DistillationState:
    """A fresh ``DistillationState``: reset envs, initial student and teacher states, a new
    optimizer over the student's ``nnx.Param`` variables.

    Envs start as in ``new_training_state`` (staggered time limits).
    """
    ts = new_training_state(
        env, student, n_envs, seed, learning_rate, gradient_clipping, weight_decay
    )
    return DistillationState(
        student=ts.networks,
        student_states=ts.network_states,
        teacher_states=teacher.initialize_state(n_envs),
        env_states=ts.env_states,
        optimizer=ts.optimizer,
        rng_key=ts.rng_key,
        steps_taken=ts.steps_taken,
    )


def _act(module: StatefulModule, state: Any, obs: Any) -> StatefulOutput:
    act = getattr(module, "act", None)  # PPONetwork skips work that acting does not need
    return act(state, obs) if act else module(state, obs)


def distillation_transition(
    env: RLEnv,
    student: StatefulModule,
    teacher: StatefulModule,
    carry: tuple[Any, Any, Any],
    rng_key_for_env_reset: jax.Array,
    start_env_states: Any = None,
) -> tuple[tuple[Any, Any, Any], DistillationTransition]:
    """One batched env step driven by the student, with the teacher's target recorded.

    Args:
        env: The (single, unbatched) env; it is vmapped here.
        student: The student; its sampled actions step the env.
        teacher: The teacher, already in eval mode (see ``eval_copy``).
        carry: ``(env_state, student_state, teacher_state)``, ``[B, ...]`` leaves.
        rng_key_for_env_reset: Key for the resets of this step; unused with
            ``start_env_states``.
        start_env_states: Where given, ended envs restart from these states
            (``rollout.restart_done``) instead of a fresh reset.

    Returns:
        The next carry (envs and both network states reset where an episode ended) and the
        step's ``DistillationTransition`` (``[B]`` leading axes). Its
        ``teacher_rollout_extras`` is ``{"loc", "scale", "actions"}``, each ``[B, A]``: the
        teacher's distribution parameters and its deterministic action.
    """
    env_state, student_state, teacher_state = carry
    student_out = _act(student, student_state, env_state.obs)
    teacher_out = _act(teacher, teacher_state, env_state.obs)
    stepped = step_envs(env, env_state, student_out.output.actions)
    done = stepped.done > 0.5
    target = {
        "loc": teacher_out.output.distribution_params["loc"],
        "scale": teacher_out.output.distribution_params["scale"],
        "actions": teacher_out.output.actions,
    }
    transition = DistillationTransition(
        obs=env_state.obs,
        student_output=student_out.output,
        rewards=stepped.reward,
        done=done,
        truncated=truncation_flags(stepped, done),
        next_obs=stepped.obs,
        metrics=stepped.metrics,
        student_rollout_extras=student_out.rollout_extras,
        teacher_rollout_extras=jax.lax.stop_gradient(target),
    )
    next_env_state = end_episodes(env, stepped, done, rng_key_for_env_reset, start_env_states)
    reset = lambda module, s: tree_where(done, module.reset_state(s), s)  # noqa: E731
    next_carry = (
        next_env_state,
        reset(student, student_out.next_state),
        reset(teacher, teacher_out.next_state),
    )
    return next_carry, transition


def unroll_distillation(
    env: RLEnv,
    env_state: Any,
    student: StatefulModule,
    student_state: Any,
    teacher: StatefulModule,
    teacher_state: Any,
    unroll_length: int,
    rng_key_for_env_reset: jax.Array,
    start_env_states: Any = None,
) -> tuple[Any, Any, Any, DistillationTransition]:
    """Runs ``unroll_length`` batched steps of ``distillation_transition``; ended envs
    restart from ``start_env_states`` where given, else are reset afresh.

    The student's variables (its sampler's random counter) advance; the teacher's are left
    as they were (whatever its calls change is discarded).

    Returns:
        ``(env_state, student_state, teacher_state, transitions)``; ``transitions`` leaves
        are ``[T, B, ...]`` (time-major).
    """

    def transition(modules: Any, carry: Any, key: jax.Array) -> tuple[Any, Any]:
        live_student, live_teacher = modules
        return distillation_transition(
            env, live_student, live_teacher, carry, key, start_env_states
        )

    carry = (env_state, student_state, teacher_state)
    carry, transitions, module_state = unroll(
        transition, (student, teacher), carry, unroll_length, rng_key_for_env_reset
    )
    if 0 in module_state:  # absent for a student without variables
        nnx.update(student, module_state[0])  # the teacher's changes are discarded
    return (*carry, transitions)


def distillation_step(
    env: RLEnv,
    teacher: StatefulModule,
    state: DistillationState,
    n_envs: int,
    rollout_length: int,
    n_epochs: int,
    n_minibatches: int,
    logging_level: LoggingLevel = LoggingLevel.LOSSES,
    logging_percentiles: tuple[int, ...] | None = None,
) -> tuple[DistillationState, dict[str, jax.Array]]:
    """One iteration: ``distillation_iteration`` with a ``DistillationConfig`` of these
    values (the others at their defaults)."""
    config = DistillationConfig(
        n_envs=n_envs,
        rollout_length=rollout_length,
        n_epochs=n_epochs,
        n_minibatches=n_minibatches,
        logging_level=logging_level,
        logging_percentiles=logging_percentiles,
    )
    return distillation_iteration(env, teacher, state, config)


def distillation_iteration(
    env: RLEnv, teacher: StatefulModule, state: DistillationState, config: DistillationConfig
) -> tuple[DistillationState, dict[str, jax.Array]]:
    """One iteration: a student-driven rollout, ``n_epochs x n_minibatches`` updates of the
    student on ``distillation_loss``, then the student's normalizer update.

    Pure apart from the student module in ``state`` (traceable; ``train_distillation`` jits
    it with ``config`` static). The teacher runs as an eval-mode copy and is never updated:
    the optimizer only knows the student, and the teacher's targets enter the loss as
    constants. Minibatches split the env axis, so each keeps whole ``[T]`` sequences for the
    recurrent replay. An env whose episode ends restarts from a reset made for it at the
    rollout's start (``rollout.rollout_start_states``), as in ``ppo_iteration``.

    Returns:
        The next ``DistillationState`` and this step's scalar metrics.
    """
    d = config
    key_unroll, key_sgd, key_next = jax.random.split(state.rng_key, 3)
    student = state.student
    start_states = state.student_states
    # Made once a rollout, not in its steps (as ``ppo_iteration``: bench/RESULTS.md, "Start-up").
    env_restarts = rollout_start_states(env, state.env_states, key_unroll)
    env_states, student_states, teacher_states, rollout = unroll_distillation(
        env,
        state.env_states,
        student,
        start_states,
        eval_copy(teacher),
        state.teacher_states,
        d.rollout_length,
        key_unroll,
        env_restarts,
    )

    def loss(module: StatefulModule, states: Any, batch: DistillationTransition) -> tuple:
        return distillation_loss(module, states, batch, d.logging_level)

    sizes = (d.n_envs, d.n_epochs, d.n_minibatches)
    loss_metrics = optimize(
        student, state.optimizer, start_states, rollout, key_sgd, sizes, loss, d.logging_level
    )
    update_statistics(student, rollout.obs)

    metrics = compute_metrics(
        loss_metrics, _as_transition(rollout), d.logging_level, d.logging_percentiles
    )
    if d.logging_level & LoggingLevel.WEIGHTS:
        log_weight_stats(metrics, student, d.logging_percentiles)
    new_state = state.replace(
        student_states=student_states,
        teacher_states=teacher_states,
        env_states=env_states,
        rng_key=key_next,
        steps_taken=advance(state.steps_taken, d.n_envs * d.rollout_length),
    )
    return new_state, metrics


def _as_transition(rollout: DistillationTransition) -> Transition:
    """The student's side of the rollout, in the form ``compute_metrics`` reads."""
    return Transition(
        obs=rollout.obs,
        network_output=rollout.student_output,
        rewards=rollout.rewards,
        done=rollout.done,
        truncated=rollout.truncated,
        next_obs=rollout.next_obs,
        metrics=rollout.metrics,
        rollout_extras=rollout.student_rollout_extras,
    )
