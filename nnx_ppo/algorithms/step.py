"""One PPO iteration as a pure function, and the state it starts from."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from nnx_ppo.algorithms.config import PPOConfig
from nnx_ppo.algorithms.losses import ppo_loss
from nnx_ppo.algorithms.metrics import compute_metrics, log_weight_stats
from nnx_ppo.algorithms.rollout import reset_envs, rollout_start_states, unroll_env
from nnx_ppo.algorithms.types import LoggingLevel, RLEnv, TrainingState, Transition
from nnx_ppo.networks.actor_critic import update_statistics
from nnx_ppo.networks.base import StatefulModule


def make_optimizer(
    learning_rate: float,
    gradient_clipping: float | None,
    weight_decay: float | None,
    decay_steps: int | None = None,
) -> optax.GradientTransformation:
    """Adam (AdamW with weight decay), optionally after global-norm gradient clipping.

    With ``decay_steps``, the learning rate falls linearly to zero over that many updates.
    """
    rate: float | optax.Schedule = learning_rate
    if decay_steps:
        rate = optax.linear_schedule(learning_rate, 0.0, decay_steps)
    tx = optax.adamw(rate, weight_decay=weight_decay) if weight_decay else optax.adam(rate)
    if gradient_clipping is not None:
        tx = optax.chain(optax.clip_by_global_norm(gradient_clipping), tx)
    return tx


def new_training_state(
    env: RLEnv,
    networks: StatefulModule,
    n_envs: int,
    seed: int,
    learning_rate: float = 0.0001,
    gradient_clipping: float | None = None,
    weight_decay: float | None = None,
    stagger_episodes: bool = True,
    learning_rate_decay_steps: int | None = None,
) -> TrainingState:
    """A fresh ``TrainingState``: reset envs, initial network states and a new optimizer.

    The optimizer (``nnx.Optimizer`` over ``nnx.Param``) refers to ``networks``.

    With ``stagger_episodes`` and an env with a time limit (an ``episode_length``
    attribute and ``info["steps"]``, as ``EpisodeWrapper`` gives), each env's step counter
    starts at a random point of the limit, so that the first episodes end at different
    times. Otherwise all envs would be truncated together forever after, and every rollout
    would see all envs in the same phase of their episodes.

    With ``learning_rate_decay_steps``, the learning rate decays linearly to zero over that
    many gradient updates.
    """
    if not isinstance(n_envs, int) or n_envs <= 0:
        raise ValueError(f"n_envs must be a positive integer, got {n_envs!r}")
    key = jax.random.key(seed)
    key_env, key_next = jax.random.split(key)
    key_env, key_stagger = jax.random.split(key_env)
    env_states = jax.jit(functools.partial(reset_envs, env))(jax.random.split(key_env, n_envs))
    if stagger_episodes:
        env_states = _stagger(env, env_states, key_stagger, n_envs)
    tx = make_optimizer(learning_rate, gradient_clipping, weight_decay, learning_rate_decay_steps)
    optimizer = nnx.Optimizer(networks, tx, wrt=nnx.Param)
    return TrainingState(
        networks=networks,
        network_states=networks.initialize_state(n_envs),
        env_states=env_states,
        optimizer=optimizer,
        rng_key=key_next,
        steps_taken=jnp.zeros((), jnp.int32),  # exact: float32 stops counting at 2**24+
    )


def _stagger(env: RLEnv, env_states: Any, key: jax.Array, n_envs: int) -> Any:
    limit = getattr(env, "episode_length", None)
    info = getattr(env_states, "info", None)
    if not isinstance(limit, int) or not isinstance(info, dict) or "steps" not in info:
        return env_states
    offsets = jax.random.randint(key, (n_envs,), 0, limit).astype(info["steps"].dtype)
    return env_states.replace(info={**info, "steps": offsets})


def env_minibatches(data: Any, key: jax.Array, n_envs: int, n_minibatches: int, axis: int) -> Any:
    """Shuffles the env axis and splits it into ``[n_minibatches, ...]`` chunks.

    Leaves without an env axis (per-step scalars) are repeated for every minibatch.
    """
    order = jax.random.permutation(key, n_envs).reshape(n_minibatches, -1)

    def split(x: jax.Array) -> jax.Array:
        if x.ndim <= axis:
            return jnp.broadcast_to(x, (n_minibatches, *x.shape))
        return jnp.moveaxis(jnp.take(x, order, axis=axis), axis, 0)

    return jax.tree.map(split, data)


def rollout_segments(rollout: Any, length: int, n_envs: int) -> Any:
    """Cuts ``[T, B, ...]`` rollout leaves into ``length``-step segments, each taken as an env
    of its own: ``[length, T / length * B, ...]``, segment ``k`` of env ``b`` at column
    ``k * B + b``. ``[T]`` leaves are first repeated for every env."""

    def cut(x: jax.Array) -> jax.Array:
        if x.ndim == 0:
            return x
        if x.ndim == 1:
            x = jnp.broadcast_to(x[:, None], (x.shape[0], n_envs))
        n_steps = x.shape[0]
        x = x.reshape(n_steps // length, length, *x.shape[1:])
        x = jnp.moveaxis(x, 0, 1)
        return x.reshape(length, -1, *x.shape[3:])

    return jax.tree.map(cut, rollout)


def check_segments(network_states: Any, config: PPOConfig) -> None:
    """Raises ``ValueError`` when ``config`` cuts the rollout into segments for a network
    that carries state: its replay needs whole sequences from the rollout's start."""
    if config.minibatch_segment_length is not None and jax.tree.leaves(network_states):
        raise ValueError(
            "ppo.minibatch_segment_length needs a stateless network: this one carries state "
            "between steps, so its minibatches must hold whole envs (set it to None)"
        )


def advance(steps_taken: jax.Array, n_steps: int) -> jax.Array:
    """The step counter after ``n_steps`` more env steps, in the counter's own dtype."""
    return steps_taken + jnp.asarray(n_steps).astype(steps_taken.dtype)


def optimize(
    networks: StatefulModule,
    optimizer: nnx.Optimizer,
    start_states: Any,
    rollout: Any,
    key: jax.Array,
    sizes: tuple[int, int, int],
    loss: Callable[[Any, Any, Any], tuple[jax.Array, dict]],
    logging_level: LoggingLevel,
) -> dict[str, jax.Array]:
    """``n_epochs`` passes of ``n_minibatches`` gradient steps on ``loss``.

    ``sizes`` is ``(n_envs, n_epochs, n_minibatches)``; each epoch shuffles the env axis of
    ``rollout`` (``[T, B]`` leaves) and ``start_states`` (``[B]`` leaves) alike.
    ``loss(module, start_states, rollout)`` of a minibatch returns ``(loss, metrics)``; only
    ``nnx.Param`` variables are differentiated. Updates ``networks`` and ``optimizer`` in
    place; returns the loss metrics averaged over all gradient steps.
    """
    n_envs, n_epochs, n_minibatches = sizes
    graphdef, params, rest = nnx.split(networks, nnx.Param, ...)  # type: ignore[misc]
    opt_graphdef, opt_state = nnx.split(optimizer)

    def loss_fn(p: nnx.State, batch: tuple[Any, Any]) -> tuple[jax.Array, dict]:
        return loss(nnx.merge(graphdef, p, rest), batch[0], batch[1])

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def sgd_step(carry: Any, batch: tuple[Any, Any]) -> tuple[Any, dict]:
        p, o_state = carry
        (_, metrics), grads = grad_fn(p, batch)
        opt = nnx.merge(opt_graphdef, o_state)
        module: Any = nnx.merge(graphdef, p, rest)
        opt.update(module, grads)
        if logging_level & LoggingLevel.GRAD_NORM:
            metrics["optimizer/grad_norm"] = optax.global_norm(grads)
        return (nnx.state(module, nnx.Param), nnx.state(opt)), metrics

    def epoch(carry: Any, epoch_key: jax.Array) -> tuple[Any, dict]:
        batches = (
            env_minibatches(start_states, epoch_key, n_envs, n_minibatches, axis=0),
            env_minibatches(rollout, epoch_key, n_envs, n_minibatches, axis=1),
        )
        return jax.lax.scan(sgd_step, carry, batches)

    (params, opt_state), metrics = jax.lax.scan(
        epoch, (params, opt_state), jax.random.split(key, n_epochs)
    )
    nnx.update(networks, params)
    nnx.update(optimizer, opt_state)
    return jax.tree.map(jnp.mean, metrics)


def ppo_step(
    env: RLEnv,
    training_state: TrainingState,
    n_envs: int,
    rollout_length: int,
    gae_lambda: float,
    discounting_factor: float,
    clip_range: float,
    normalize_advantages: bool,
    combine_advantages: bool,
    n_epochs: int,
    n_minibatches: int,
    critic_loss_weight: float = 1.0,
    logging_level: LoggingLevel = LoggingLevel.LOSSES,
    logging_percentiles: tuple[int, ...] | None = None,
) -> tuple[TrainingState, dict[str, jax.Array]]:
    """One PPO iteration (the seed's signature): ``ppo_iteration`` with a ``PPOConfig`` of
    these values (the others at their defaults)."""
    config = PPOConfig(
        n_envs=n_envs,
        rollout_length=rollout_length,
        gae_lambda=gae_lambda,
        discounting_factor=discounting_factor,
        clip_range=clip_range,
        normalize_advantages=normalize_advantages,
        combine_advantages=combine_advantages,
        n_epochs=n_epochs,
        n_minibatches=n_minibatches,
        critic_loss_weight=critic_loss_weight,
        logging_level=logging_level,
        logging_percentiles=logging_percentiles,
    )
    return ppo_iteration(env, training_state, config)


def ppo_iteration(
    env: RLEnv, training_state: TrainingState, config: PPOConfig
) -> tuple[TrainingState, dict[str, jax.Array]]:
    """One PPO iteration: a rollout, ``n_epochs x n_minibatches`` updates, normalizer update.

    An env whose episode ends during the rollout restarts from a fresh reset made for it at
    the rollout's start (``rollout_start_states``); one that ends twice in a rollout starts
    both episodes from it.

    Pure apart from the modules it is given (traceable; ``train_ppo`` jits it with
    ``config`` static). Minibatches split the env axis, so each keeps whole ``[T]``
    sequences for the recurrent replay, unless ``minibatch_segment_length`` cuts the rollout
    into shorter segments first (stateless networks).

    Returns:
        The next ``TrainingState`` and this step's scalar metrics.
    """
    p = config
    key_unroll, key_sgd, key_next = jax.random.split(training_state.rng_key, 3)
    networks = training_state.networks
    start_states = training_state.network_states
    # Made here, once a rollout, and not in its steps: compiling the env's reset inside the
    # step was most of the training program's compile (bench/RESULTS.md, "Start-up").
    env_restarts = rollout_start_states(env, training_state.env_states, key_unroll)
    env_states, network_states, rollout = unroll_env(
        env,
        training_state.env_states,
        networks,
        start_states,
        p.rollout_length,
        key_unroll,
        env_restarts,
    )

    def loss(module: StatefulModule, states: Any, batch: Transition) -> tuple[jax.Array, dict]:
        return ppo_loss(
            module,
            states,
            batch,
            p.clip_range,
            p.normalize_advantages,
            p.combine_advantages,
            p.discounting_factor,
            p.gae_lambda,
            p.critic_loss_weight,
            p.logging_level,
            reward_scaling=p.reward_scaling,
        )

    check_segments(start_states, p)
    batch, n_sequences = rollout, p.n_envs
    if p.minibatch_segment_length is not None:
        batch = rollout_segments(rollout, p.minibatch_segment_length, p.n_envs)
        n_sequences = p.n_envs * (p.rollout_length // p.minibatch_segment_length)
    sizes = (n_sequences, p.n_epochs, p.n_minibatches)
    loss_metrics = optimize(
        networks,
        training_state.optimizer,
        start_states,
        batch,
        key_sgd,
        sizes,
        loss,
        p.logging_level,
    )
    update_statistics(networks, rollout.obs)

    metrics = compute_metrics(loss_metrics, rollout, p.logging_level, p.logging_percentiles)
    if p.logging_level & LoggingLevel.WEIGHTS:
        log_weight_stats(metrics, networks, p.logging_percentiles)
    new_state = training_state.replace(
        network_states=network_states,
        env_states=env_states,
        rng_key=key_next,
        steps_taken=advance(training_state.steps_taken, p.n_envs * p.rollout_length),
    )
    return new_state, metrics
