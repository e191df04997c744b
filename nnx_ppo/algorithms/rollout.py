"""Rollouts: stepping batched envs with a stateful network, and evaluation episodes.

Everything here is traceable (called inside ``jax.jit``). Networks are ``nnx`` modules; each
scan carries the module's ``nnx.State`` explicitly (``module_scan``: ``nnx.split`` once,
``nnx.merge`` in the body) so that random-number counters advance without leaking tracers.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from nnx_ppo.algorithms.activations import record_activations_rollout as record_activations_rollout
from nnx_ppo.algorithms.module_scan import eval_copy, scan_with_modules, unroll
from nnx_ppo.algorithms.render_rollout import SlimData as SlimData
from nnx_ppo.algorithms.render_rollout import SlimState as SlimState
from nnx_ppo.algorithms.render_rollout import (
    eval_rollout_for_render_scan as eval_rollout_for_render_scan,
)
from nnx_ppo.algorithms.render_rollout import unstack_trajectory as unstack_trajectory
from nnx_ppo.algorithms.streams import stream_names, sum_leaves
from nnx_ppo.algorithms.types import LoggingLevel, RLEnv, Transition
from nnx_ppo.envs.chunked import step_envs
from nnx_ppo.networks.base import StatefulModule


def tree_where(cond: jax.Array, on_true: Any, on_false: Any) -> Any:
    """Per-env select between two pytrees whose leaves have the batch as leading axis.

    Args:
        cond: ``[B]`` booleans.
        on_true: Pytree taken where ``cond``.
        on_false: Pytree of the same structure taken elsewhere.
    """

    def select(a: jax.Array, b: jax.Array) -> jax.Array:
        mask = cond.reshape(cond.shape + (1,) * (jnp.ndim(a) - cond.ndim))
        return jnp.where(mask, a, b)

    return jax.tree.map(select, on_true, on_false)


def truncation_flags(env_state: Any, done: jax.Array) -> jax.Array:
    """``[B]`` True where an episode ended by its time limit (``info["truncated"]``, or
    Brax's ``info["truncation"]``); all False for envs that report neither."""
    info = env_state.info
    flag = info.get("truncated", info.get("truncation")) if isinstance(info, dict) else None
    if flag is None:
        return jnp.zeros_like(done)
    return jnp.logical_and(flag > 0.5, done)


def reset_envs(env: RLEnv, keys: jax.Array, previous: Any = None) -> Any:
    """Resets a batch of envs, one per key (``[B]`` keys -> ``[B]`` states): ``vmap`` of
    ``env.reset``, or the env's own ``reset_batch(keys, previous)`` where it has one (a
    domain-randomized env, ``nnx_ppo.envs.randomization``: env ``i`` resets on the model
    variant ``previous`` env ``i`` carries, or on variant ``i`` without ``previous``)."""
    reset_batch = getattr(env, "reset_batch", None)
    if reset_batch is not None:
        return reset_batch(keys, previous)
    return jax.vmap(env.reset)(keys)


def reset_done(env: RLEnv, env_state: Any, done: jax.Array, key: jax.Array) -> Any:
    """Resets the envs where ``done``, env ``i`` from ``jax.random.split(key, B)[i]``.

    Computes only what the step needs: nothing when no env is done, else resets of the done
    envs, ``reset_chunk(B)`` at a time (gathered, reset, scattered back), in as many rounds
    as it takes. With staggered time limits some env ends on most steps, and one round
    resets them all; resetting every env and keeping the few instead made the rollout twice
    as long (``bench.rollout_split``). Each env's new state is what a reset of all ``B``
    gives it, and the step compiles one reset, of ``reset_chunk(B)`` envs.
    """
    n_envs = done.shape[0]
    chunk = reset_chunk(n_envs)
    if chunk >= n_envs:
        return _reset_where(env, env_state, done, key)

    def some_left(carry: tuple[Any, jax.Array]) -> jax.Array:
        return jnp.any(carry[1])

    def reset_some(carry: tuple[Any, jax.Array]) -> tuple[Any, jax.Array]:
        state, left = carry
        # The first ``chunk`` envs left, padded with ``n_envs`` (out of range: dropped).
        (rows,) = jnp.nonzero(left, size=chunk, fill_value=n_envs)
        keys = jnp.take(jax.random.split(key, n_envs), rows, axis=0, mode="clip")
        previous = jax.tree.map(lambda x: jnp.take(x, rows, axis=0, mode="clip"), state)
        fresh = reset_envs(env, keys, previous)
        state = jax.tree.map(lambda x, y: jnp.asarray(x).at[rows].set(y, mode="drop"), state, fresh)
        return state, left.at[rows].set(False, mode="drop")

    def reset_rounds(state: Any) -> Any:
        return jax.lax.while_loop(some_left, reset_some, (state, done))[0]

    # The loop's own test would skip it too, but with the loop alone the rollout without
    # stagger (no env done on most steps) took 1.14 ms a batched step on a TPU at 2048 envs,
    # against 0.92 with the earlier reset-all under this same ``cond`` (bench/RESULTS.md).
    return jax.lax.cond(jnp.any(done), reset_rounds, lambda state: state, env_state)


def _reset_where(env: RLEnv, env_state: Any, done: jax.Array, key: jax.Array) -> Any:
    """Resets every env when one is done and keeps the done ones (for small batches)."""

    def reset_all(state: Any) -> Any:
        keys = jax.random.split(key, done.shape[0])
        return tree_where(done, reset_envs(env, keys, state), state)

    return jax.lax.cond(jnp.any(done), reset_all, lambda state: state, env_state)


def reset_chunk(n_envs: int) -> int:
    """How many done envs ``reset_done`` resets in one round: 16 per 256 envs (with
    staggered 1000-step episodes, 2048 envs end ~2 a step, never 128 in practice; all at
    once, as unstaggered episodes end, take 16 rounds). A multiple of 16: XLA:CPU vectorizes
    a batch of 8 differently, and FingerSpin's reset then differs in the last bit."""
    return 16 * max(1, -(-n_envs // 256))


def rollout_start_states(env: RLEnv, env_states: Any, key: jax.Array) -> Any:
    """Fresh start states for the envs that end during one rollout (``unroll_env``'s
    ``start_env_states``): a reset of every env, env ``i`` from ``jax.random.split(key,
    B)[i]`` on the model variant it carries (``reset_envs`` with ``env_states`` as
    ``previous``)."""
    n_envs = jax.tree.leaves(env_states)[0].shape[0]
    return reset_envs(env, jax.random.split(key, n_envs), env_states)


def restart_done(env_state: Any, done: jax.Array, start_env_states: Any) -> Any:
    """Puts the envs where ``done`` into their ``start_env_states`` (``[B]`` leaves), with
    no reset to compile in the step: nothing on a step where no env ended; where at most
    ``reset_chunk(B)`` did (with staggered time limits, most steps), only their rows are
    copied; otherwise a select over every env."""
    n_envs = done.shape[0]
    chunk = reset_chunk(n_envs)

    def copy_rows(state: Any) -> Any:
        # The done envs' rows, padded with ``n_envs`` (out of range: dropped).
        (rows,) = jnp.nonzero(done, size=chunk, fill_value=n_envs)
        take = lambda x: jnp.take(x, rows, axis=0, mode="clip")  # noqa: E731
        put = lambda x, y: jnp.asarray(x).at[rows].set(take(y), mode="drop")  # noqa: E731
        return jax.tree.map(put, state, start_env_states)

    def select_all(state: Any) -> Any:
        return tree_where(done, start_env_states, state)

    n_done = jnp.sum(done)
    branch = jnp.where(n_done == 0, 0, jnp.where(n_done <= chunk, 1, 2))
    return jax.lax.switch(branch, [lambda state: state, copy_rows, select_all], env_state)


def end_episodes(
    env: RLEnv, env_state: Any, done: jax.Array, key: jax.Array, start_env_states: Any = None
) -> Any:
    """The envs after a step: those where ``done`` restart from ``start_env_states`` where
    given (``restart_done``), else from a fresh reset from ``key`` (``reset_done``)."""
    if start_env_states is None:
        return reset_done(env, env_state, done, key)
    return restart_done(env_state, done, start_env_states)


def single_transition(
    env: RLEnv,
    networks: StatefulModule,
    carry: tuple[Any, Any],
    rng_keys_for_env_reset: jax.Array,
    start_env_states: Any = None,
) -> tuple[tuple[Any, Any], Transition]:
    """One batched env step: act, step, record, then reset what ended.

    Args:
        env: The (single, unbatched) env; it is vmapped here.
        networks: The actor-critic ``StatefulModule``; its random counters advance.
        carry: ``(env_state, network_state)``, each with ``[B, ...]`` leaves.
        rng_keys_for_env_reset: Key for the resets of this step (one key, split per env
            only when some env is done); unused with ``start_env_states``.
        start_env_states: Where given, ended envs restart from these states
            (``restart_done``) instead of a fresh reset (``reset_done``).

    Returns:
        The next carry (envs and network states reset where an episode ended) and the
        ``Transition`` of this step (``[B]`` leading axes). ``next_obs`` is the observation
        after the step, before any reset; ``bootstrap_values`` holds the value of
        ``next_obs`` where the episode was truncated.
    """
    env_state, network_state = carry
    act = getattr(networks, "act", None)  # PPONetwork skips work that acting does not need
    out = act(network_state, env_state.obs) if act else networks(network_state, env_state.obs)
    stepped = step_envs(env, env_state, out.output.actions)
    done = stepped.done > 0.5
    truncated = truncation_flags(stepped, done)
    bootstrap = _bootstrap_values(networks, out.next_state, stepped.obs, truncated)
    transition = Transition(
        obs=env_state.obs,
        network_output=out.output,
        rewards=stepped.reward,
        done=done,
        truncated=truncated,
        next_obs=stepped.obs,
        metrics=stepped.metrics,
        rollout_extras=out.rollout_extras,
        bootstrap_values=bootstrap,
    )
    next_env_state = end_episodes(env, stepped, done, rng_keys_for_env_reset, start_env_states)
    next_network_state = tree_where(done, networks.reset_state(out.next_state), out.next_state)
    return (next_env_state, next_network_state), transition


def _bootstrap_values(
    networks: StatefulModule, network_state: Any, next_obs: Any, truncated: jax.Array
) -> Any:
    """Value of ``next_obs`` where ``truncated`` (else 0), one per value head; computed only
    when some env was truncated."""
    graphdef, state = nnx.split(networks)

    def evaluate(module_state: Any) -> Any:
        copy = nnx.merge(graphdef, module_state)  # a throw-away copy: its RNG use is discarded
        values = copy(network_state, next_obs).output.value_estimates
        return jax.tree.map(lambda v: jnp.where(truncated, v, 0.0), values)

    shapes = jax.eval_shape(evaluate, state)
    zeros = lambda _: jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)  # noqa: E731
    return jax.lax.cond(jnp.any(truncated), evaluate, zeros, state)


def unroll_env(
    env: RLEnv,
    env_state: Any,
    networks: StatefulModule,
    network_state: Any,
    unroll_length: int,
    rng_key_for_env_reset: jax.Array,
    start_env_states: Any = None,
) -> tuple[Any, Any, Transition]:
    """Runs ``unroll_length`` batched steps; ended envs restart from ``start_env_states``
    where given, else are reset afresh (``single_transition``).

    Returns:
        ``(env_state, network_state, transitions)`` where ``transitions`` leaves are
        ``[T, B, ...]`` (time-major).
    """

    def transition(module: Any, carry: Any, key: jax.Array) -> tuple[Any, Transition]:
        return single_transition(env, module, carry, key, start_env_states)

    carry = (env_state, network_state)
    carry, transitions, module_state = unroll(
        transition, networks, carry, unroll_length, rng_key_for_env_reset
    )
    nnx.update(networks, module_state)
    return *carry, transitions


def eval_rollout(
    env: RLEnv,
    networks: StatefulModule,
    n_envs: int,
    max_episode_length: int,
    key: jax.Array,
    logging_percentiles: tuple[int, ...] | None = None,
    logging_level: LoggingLevel = LoggingLevel.NONE,
) -> dict[str, jax.Array]:
    """Runs one deterministic episode in each of ``n_envs`` fresh envs (env ``i`` on model
    variant ``i`` where ``env`` is domain-randomized, see ``reset_envs``).

    The policy runs in eval mode (the mean action) on a copy of ``networks``; the module
    passed in is left as it was. Each env runs until it is done or ``max_episode_length``
    steps have passed; it is not reset.

    Returns:
        ``eval/episode_reward`` and ``eval/episode_length`` (means), plus either
        ``eval/episode_reward_std`` or ``eval/episode_reward_p{q}`` per percentile, and
        ``eval/env/{metric}`` (mean over live steps) with ``LoggingLevel.ENV_METRICS``. With
        several reward streams, ``eval/episode_reward`` is their sum and
        ``eval/episode_reward/{stream}`` each stream's mean.
    """
    module = eval_copy(networks)
    key_reset, _ = jax.random.split(key)
    env_state = reset_envs(env, jax.random.split(key_reset, n_envs))
    network_state = module.initialize_state(n_envs)
    zeros = jnp.zeros((n_envs,), jnp.float32)
    env_sums = _env_metric_sums(env_state, n_envs, logging_level)
    stream_sums = jax.tree.map(lambda _: zeros, env_state.reward)

    def body(m: Any, carry: tuple[Any, ...], _: Any) -> tuple[tuple[Any, ...], None]:
        env_s, net_s, done, streams, length, sums = carry
        out = m(net_s, env_s.obs)
        env_s = step_envs(env, env_s, out.output.actions)
        live = jnp.logical_not(done)
        streams = jax.tree.map(lambda r, x: r + jnp.where(live, x, 0.0), streams, env_s.reward)
        length = length + live
        sums = {k: v + jnp.where(live, env_s.metrics[k], 0.0) for k, v in sums.items()}
        done = jnp.logical_or(done, env_s.done > 0.5)
        return (env_s, out.next_state, done, streams, length, sums), None

    init = (env_state, network_state, zeros > 1.0, stream_sums, zeros, env_sums)
    final, _, _ = scan_with_modules(body, module, init, length=max_episode_length)
    _, _, _, streams, length, sums = final
    reward = sum_leaves(jax.tree.leaves(streams))
    metrics = {"eval/episode_reward": jnp.mean(reward), "eval/episode_length": jnp.mean(length)}
    metrics.update(_spread("eval/episode_reward", reward, logging_percentiles))
    named = stream_names(streams)
    if len(named) > 1:
        metrics.update({f"eval/episode_reward/{name}": jnp.mean(r) for name, r in named})
    for name, total in sums.items():
        metrics[f"eval/env/{name}"] = jnp.sum(total) / jnp.maximum(jnp.sum(length), 1.0)
    return metrics


def _env_metric_sums(env_state: Any, n_envs: int, level: LoggingLevel) -> dict[str, jax.Array]:
    if not level & LoggingLevel.ENV_METRICS:
        return {}
    return {
        k: jnp.zeros((n_envs,), jnp.float32)
        for k, v in env_state.metrics.items()
        if jnp.shape(v) == (n_envs,)
    }


def _spread(
    name: str, values: jax.Array, percentiles: tuple[int, ...] | None
) -> dict[str, jax.Array]:
    if percentiles is None:
        return {f"{name}_std": jnp.std(values)}
    qs = jnp.percentile(values, jnp.asarray(percentiles, jnp.float32))
    return {f"{name}_p{int(q)}": qs[i] for i, q in enumerate(percentiles)}
