"""The PPO objective: generalized advantage estimation and the clipped surrogate loss."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.algorithms.action_heads import head_metrics
from nnx_ppo.algorithms.module_scan import scan_with_modules
from nnx_ppo.algorithms.rollout import tree_where
from nnx_ppo.algorithms.streams import check_streams, stream_names, sum_leaves
from nnx_ppo.algorithms.types import LoggingLevel, Transition
from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.networks.types import StatefulOutput


def gae(
    rewards: jax.Array,
    values_excl_last: jax.Array,
    last_value: jax.Array,
    done: jax.Array,
    truncation: jax.Array,
    lambda_: float,
    gamma: float,
    bootstrap_values: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Generalized advantage estimation over a time-major rollout.

    Args:
        rewards: ``[T, B]`` reward of each step.
        values_excl_last: ``[T, B]`` value of the observation each step acted on.
        last_value: ``[B]`` value of the observation after the last step.
        done: ``[T, B]`` the episode ended at this step (termination or truncation).
        truncation: ``[T, B]`` the episode ended at this step because of a time limit.
        lambda_: GAE lambda.
        gamma: Discount.
        bootstrap_values: ``[T, B]`` value of the observation after each step, used where
            ``truncation``: a truncated step bootstraps from its next observation instead of
            being treated as terminal. When None, the value of the step's own observation
            stands in for it.

    Returns:
        ``(advantages, value_targets)``, each ``[T, B]``; targets are advantages + values.
    """
    done = done.astype(jnp.float32)
    truncation = truncation.astype(jnp.float32) * done
    if bootstrap_values is None:
        bootstrap_values = values_excl_last
    next_values = jnp.concatenate([values_excl_last[1:], last_value[None]], axis=0)
    # Within an episode: bootstrap from the next step. At a termination: nothing. At a
    # truncation: the value of the observation the episode was cut at.
    next_values = (1.0 - done) * next_values + truncation * bootstrap_values
    deltas = rewards + gamma * next_values - values_excl_last
    decay = gamma * lambda_ * (1.0 - done)

    def backward(carry: jax.Array, x: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        delta, d = x
        advantage = delta + d * carry
        return advantage, advantage

    _, advantages = jax.lax.scan(
        backward, jnp.zeros_like(last_value), (deltas, decay), reverse=True
    )
    return advantages, advantages + values_excl_last


class Replay(NamedTuple):
    """The network's outputs over a rollout, recomputed with the current parameters.

    Attributes:
        loglikelihoods: ``[T, B]`` log-likelihood of the recorded actions.
        values: ``[T, B]`` value estimates (a pytree for several reward streams).
        last_value: ``[B]`` value of the observation after the last step.
        metrics: Network metrics, ``[T, B]`` leaves.
        regularization: Mean regularization loss.
    """

    loglikelihoods: jax.Array
    values: Any
    last_value: Any
    metrics: dict[str, jax.Array]
    regularization: jax.Array


def _replay(networks: StatefulModule, network_state: Any, data: Transition) -> Replay:
    """Runs the network over a rollout again, resetting state where episodes ended."""
    n_steps = data.done.shape[0]
    last_obs = jax.tree.map(lambda x: x[-1], data.next_obs)
    last_extras = jax.tree.map(lambda x: x[-1], data.rollout_extras)
    if not jax.tree.leaves(network_state):
        # Stateless network: one batched call over all T + 1 observations.
        append = lambda a, b: jnp.concatenate([a, b[None]])  # noqa: E731
        obs = jax.tree.map(append, data.obs, last_obs)
        extras = jax.tree.map(append, data.rollout_extras, last_extras)
        flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), (obs, extras))
        out = networks(network_state, flat[0], flat[1])
        o = out.output
        per_step = (o.loglikelihoods, o.value_estimates, o.metrics)
        loglik, values, metrics = jax.tree.map(
            lambda x: x.reshape(n_steps + 1, -1, *x.shape[1:]), per_step
        )
        head = lambda x: x[:-1]  # noqa: E731
        return Replay(
            head(loglik),
            jax.tree.map(head, values),
            jax.tree.map(lambda x: x[-1], values),
            jax.tree.map(head, metrics),
            out.regularization_loss,
        )

    def select(out: StatefulOutput) -> tuple[Any, ...]:
        o = out.output
        return (o.loglikelihoods, o.value_estimates, o.metrics, out.regularization_loss)

    (loglik, values, metrics, reg), module, state = replay_scan(
        networks, network_state, data.obs, data.rollout_extras, data.done, select
    )
    last = module(state, last_obs, last_extras)  # same episode: no reset before it
    return Replay(loglik, values, last.output.value_estimates, metrics, jnp.mean(reg))


def replay_scan(
    networks: StatefulModule,
    network_state: Any,
    obs: Any,
    rollout_extras: Any,
    done: jax.Array,
    select: Callable[[StatefulOutput], Any],
) -> tuple[Any, nnx.Module, Any]:
    """Steps a stateful network over ``[T, B]`` inputs, resetting its state after each step
    where ``done``; returns ``select(output)`` of every step stacked on a ``[T]`` axis, the
    module after the last step, and its state after the last step (not reset)."""
    reset_before = jnp.concatenate([jnp.zeros_like(done[:1]), done[:-1]], axis=0)

    def body(module: Any, state: Any, x: tuple[Any, Any, jax.Array]) -> tuple[Any, Any]:
        step_obs, extras, reset = x
        state = tree_where(reset, module.reset_state(state), state)
        out = module(state, step_obs, extras)
        return out.next_state, select(out)

    xs = (obs, rollout_extras, reset_before)
    state, ys, module_state = scan_with_modules(body, networks, network_state, xs)
    return ys, nnx.merge(nnx.graphdef(networks), module_state), state


def ppo_loss(
    networks: StatefulModule,
    network_state: Any,
    rollout_data: Transition,
    clip_range: float,
    normalize_advantages: bool,
    combine_advantages: bool,
    discounting_factor: float,
    gae_lambda: float,
    critic_loss_weight: float,
    logging_level: LoggingLevel,
    reward_scaling: float = 1.0,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Clipped PPO loss of a ``[T, B]`` rollout (or minibatch of envs).

    The network is replayed over the rollout from ``network_state`` (its state before the
    rollout's first step), scoring the recorded actions. Advantages come from GAE on the
    replayed values (without gradient), on rewards times ``reward_scaling``.

    Rewards may be a pytree of streams (``{"task": [T, B], "energy": [T, B]}``); the network
    then has one value head per stream (``value_estimates`` of the same structure), each
    stream gets its own GAE and value loss, and the policy loss follows
    ``combine_advantages`` (see ``PPOConfig``): True sums the streams' advantages first
    (normalized after the sum) into one clipped term; False normalizes each stream and adds
    one clipped term per stream.

    Returns:
        ``(total_loss, metrics)``; ``total = actor + critic_loss_weight * critic +
        regularization`` with ``critic`` the sum over streams of ``0.5 * mean((value -
        target)^2)``. With several streams, ``losses/actor/<stream>`` (False) and
        ``losses/critic/<stream>`` are reported too.
    """
    replay = _replay(networks, network_state, rollout_data)
    values, last_value, regularization = replay.values, replay.last_value, replay.regularization
    rewards = rollout_data.rewards
    check_streams(rewards, values)
    bootstrap = rollout_data.bootstrap_values
    if bootstrap is None:  # documented fallback of gae: the step's own value
        bootstrap = values

    def advantage_of(reward: jax.Array, v: jax.Array, last: jax.Array, boot: jax.Array) -> Any:
        return gae(
            reward * reward_scaling,
            jax.lax.stop_gradient(v),
            jax.lax.stop_gradient(last),
            rollout_data.done,
            rollout_data.truncated,
            gae_lambda,
            discounting_factor,
            jax.lax.stop_gradient(boot),
        )

    results = jax.tree.map(advantage_of, rewards, values, last_value, bootstrap)
    is_pair = lambda x: isinstance(x, tuple)  # noqa: E731
    advantages = jax.tree.map(lambda r: r[0], results, is_leaf=is_pair)
    targets = jax.tree.map(lambda r: r[1], results, is_leaf=is_pair)

    old_loglik = rollout_data.network_output.loglikelihoods
    log_ratio = replay.loglikelihoods - old_loglik
    ratio = jnp.exp(log_ratio)
    clipped = jnp.clip(ratio, 1.0 - clip_range, 1.0 + clip_range)

    def clipped_objective(advantage: jax.Array) -> jax.Array:
        return -jnp.mean(jnp.minimum(ratio * advantage, clipped * advantage))

    actor_terms = {
        name: clipped_objective(a)
        for name, a in policy_advantages(advantages, normalize_advantages, combine_advantages)
    }
    actor_loss = sum_leaves(list(actor_terms.values()))
    critic_losses = jax.tree.map(lambda v, t: 0.5 * jnp.mean(jnp.square(v - t)), values, targets)
    critic_loss = sum_leaves(jax.tree.leaves(critic_losses))
    total = actor_loss + critic_loss_weight * critic_loss + regularization
    metrics: dict[str, jax.Array] = {
        "losses/total": total,
        "losses/actor": actor_loss,
        "losses/critic": critic_loss,
        "losses/regularization": regularization,
    }
    named_critic = stream_names(critic_losses)
    if len(named_critic) > 1:
        metrics.update({f"losses/critic/{n}": c for n, c in named_critic})
        if len(actor_terms) > 1:
            metrics.update({f"losses/actor/{n}": a for n, a in actor_terms.items()})
    if logging_level & LoggingLevel.CRITIC_EXTRA:
        flat_v, flat_t = jax.tree.leaves(values)[0], jax.tree.leaves(targets)[0]
        residual = jnp.var(flat_t - flat_v) / jnp.maximum(jnp.var(flat_t), 1e-8)
        metrics["critic/explained_variance"] = 1.0 - residual
        metrics["critic/value_mean"] = jnp.mean(flat_v)
        metrics["critic/target_mean"] = jnp.mean(flat_t)
    if logging_level & LoggingLevel.ACTOR_EXTRA:
        metrics["actor/approx_kl"] = jnp.mean((ratio - 1.0) - log_ratio)
        metrics["actor/clip_fraction"] = jnp.mean(jnp.abs(ratio - 1.0) > clip_range)
        metrics["actor/entropy"] = jnp.mean(replay.metrics["entropy"])
        metrics["actor/action_std"] = jnp.mean(replay.metrics["action_std"])
        for head, entropy in head_metrics(replay.metrics, "entropy").items():
            metrics[f"actor/entropy/{head}"] = jnp.mean(entropy)
    return total, metrics


def policy_advantages(
    advantages: Any, normalize: bool, combine_first: bool
) -> list[tuple[str, jax.Array]]:
    """The advantages the policy loss is taken of, one ``(name, [T, B])`` per clipped term.

    ``combine_first``: the streams' sum, standardized after summing (one term, named
    ``""``). Otherwise each stream standardized on its own, one term per stream.
    """

    def standardize(a: jax.Array) -> jax.Array:
        return (a - jnp.mean(a)) / (jnp.std(a) + 1e-8) if normalize else a

    named = stream_names(advantages)
    if combine_first or len(named) == 1:
        return [("", standardize(sum_leaves([a for _, a in named])))]
    return [(name, standardize(a)) for name, a in named]
