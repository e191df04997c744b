"""The distillation objective: the student's action distribution against the teacher's.

Both networks end in a tanh-normal sampler: an action is ``tanh(u)`` with ``u ~ N(loc,
scale)`` (diagonal); with several action heads (dict actions) one per head, and the KL of
the joint distributions is the sum of the heads' (``action_heads.sum_over_heads``). The
loss is the KL divergence ``KL(teacher || student)`` of the two action distributions,
averaged over the ``[T, B]`` steps of a rollout. ``tanh`` is a bijection applied to both,
and a KL divergence does not change under a bijection of both variables, so this is exactly
the KL between the underlying normals::

    KL = sum_a [log(s_s / s_t) + (s_t^2 + (m_t - m_s)^2) / (2 s_s^2) - 1/2]

(``m``, ``s``: loc and scale; ``_t`` teacher, ``_s`` student). It is zero exactly when the
two distributions agree and positive otherwise. This direction (the teacher's distribution
first) is the expected negative log-likelihood of the teacher's actions under the student,
up to the teacher's entropy: the student learns the teacher's mean and its spread. The mean
error is weighted by ``1 / s_s^2``, so where the teacher is sure of itself (small scale),
the student is held to it closely.

The student's value head gets no gradient (its parameters stay as they were), and the
network's regularization loss (for a ``PPONetwork``: the entropy bonus, which would pull the
student's scale away from the teacher's) is not added.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from nnx_ppo.algorithms.action_heads import (
    is_multi_head,
    map_heads,
    mean_over_heads,
    sum_over_heads,
)
from nnx_ppo.algorithms.losses import replay_scan
from nnx_ppo.algorithms.types import DistillationTransition, LoggingLevel
from nnx_ppo.networks.base import StatefulModule


class StudentReplay(NamedTuple):
    """The student's action distributions over a rollout, with its current parameters.

    Attributes:
        loc: ``[T, B, A]`` mean of the pre-tanh normal (a dict ``{head: [T, B, A_head]}``
            for several action heads).
        scale: ``[T, B, A]`` its standard deviation (the same structure).
    """

    loc: Any
    scale: Any


def gaussian_kl(
    teacher_loc: jax.Array,
    teacher_scale: jax.Array,
    student_loc: jax.Array,
    student_scale: jax.Array,
) -> jax.Array:
    """``KL(N(teacher_loc, teacher_scale) || N(student_loc, student_scale))``, diagonal.

    Args:
        teacher_loc: ``[..., A]`` teacher means.
        teacher_scale: ``[..., A]`` teacher standard deviations (positive).
        student_loc: ``[..., A]`` student means.
        student_scale: ``[..., A]`` student standard deviations (positive).

    Returns:
        ``[...]``: the divergence, summed over the action axis.
    """
    variance_ratio = jnp.square(teacher_scale) / jnp.square(student_scale)
    mean_term = jnp.square(teacher_loc - student_loc) / (2.0 * jnp.square(student_scale))
    per_dim = jnp.log(student_scale) - jnp.log(teacher_scale) + 0.5 * variance_ratio - 0.5
    return jnp.sum(per_dim + mean_term, axis=-1)


def _distribution(output: Any) -> tuple[jax.Array, jax.Array]:
    params = output.distribution_params
    return params["loc"], params["scale"]


def replay_student(
    student: StatefulModule, student_state: Any, data: DistillationTransition
) -> StudentReplay:
    """Runs the student over a rollout again, resetting its state where episodes ended.

    The replay of ``losses._replay``, reading the distribution parameters instead of
    log-likelihoods and values. The recorded ``student_rollout_extras`` (the raw actions)
    are passed back, so a sampler scores them instead of drawing new ones.

    Args:
        student: The student ``StatefulModule`` (a ``PPONetwork``).
        student_state: Its state before the rollout's first step, ``[B, ...]`` leaves.
        data: The rollout, ``[T, B, ...]`` leaves.

    Returns:
        The student's ``[T, B, A]`` loc and scale at every step.
    """
    n_steps = data.done.shape[0]
    if not jax.tree.leaves(student_state):
        # Stateless student: one batched call over all T * B observations.
        flat = jax.tree.map(
            lambda x: x.reshape(-1, *x.shape[2:]), (data.obs, data.student_rollout_extras)
        )
        loc, scale = _distribution(student(student_state, flat[0], flat[1]).output)
        unflatten = lambda x: x.reshape(n_steps, -1, *x.shape[1:])  # noqa: E731
        return StudentReplay(jax.tree.map(unflatten, loc), jax.tree.map(unflatten, scale))

    (loc, scale), _, _ = replay_scan(
        student,
        student_state,
        data.obs,
        data.student_rollout_extras,
        data.done,
        lambda out: _distribution(out.output),
    )
    return StudentReplay(loc, scale)


def distillation_loss(
    student: StatefulModule,
    student_state: Any,
    rollout_data: DistillationTransition,
    logging_level: LoggingLevel = LoggingLevel.LOSSES,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Mean ``KL(teacher || student)`` of a ``[T, B]`` rollout (or minibatch of envs).

    The student is replayed from ``student_state`` (its state before the rollout's first
    step). The targets are ``rollout_data.teacher_rollout_extras``: a dict with the
    teacher's ``loc``, ``scale`` and deterministic ``actions``, each ``[T, B, A]``,
    recorded in the rollout. They are constants here (``stop_gradient``): no gradient
    reaches the teacher.

    Returns:
        ``(loss, metrics)``: ``losses/distillation`` (the loss); with
        ``LoggingLevel.ACTOR_EXTRA`` also ``actor/loc_error`` (mean absolute difference of
        the means), ``actor/action_error`` (mean absolute difference between the student's
        deterministic action ``tanh(loc)`` and the teacher's), ``actor/action_std`` and
        ``actor/teacher_action_std`` (mean scales).
    """
    target = jax.lax.stop_gradient(rollout_data.teacher_rollout_extras)
    replay = replay_student(student, student_state, rollout_data)
    # [T, B]; with several action heads the sum of the heads' divergences (they are
    # independent, so this is the KL of the joint action distributions)
    kl = sum_over_heads(gaussian_kl, target["loc"], target["scale"], replay.loc, replay.scale)
    loss = jnp.mean(kl)
    metrics = {"losses/distillation": loss}
    if logging_level & LoggingLevel.ACTOR_EXTRA:
        abs_diff = lambda a, b: jnp.abs(a - b)  # noqa: E731
        abs_action_diff = lambda loc, a: jnp.abs(jnp.tanh(loc) - a)  # noqa: E731
        metrics["actor/loc_error"] = mean_over_heads(abs_diff, replay.loc, target["loc"])
        metrics["actor/action_error"] = mean_over_heads(
            abs_action_diff, replay.loc, target["actions"]
        )
        metrics["actor/action_std"] = mean_over_heads(lambda x: x, replay.scale)
        metrics["actor/teacher_action_std"] = mean_over_heads(lambda x: x, target["scale"])
        if is_multi_head(replay.loc):
            per_head = map_heads(
                gaussian_kl, target["loc"], target["scale"], replay.loc, replay.scale
            )
            metrics.update({f"actor/kl/{h}": jnp.mean(v) for h, v in per_head.items()})
    return loss, metrics
