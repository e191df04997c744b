"""An evaluation episode recorded for rendering: one env, slim states stacked by a scan.

``eval_rollout_for_render_scan`` is traceable and meant to be jitted; ``unstack_trajectory``
runs on the host and turns its output into the list of states that MuJoCo Playground's
``env.render(trajectory, height=..., width=...)`` draws. Only the fields rendering needs are
kept (``SlimData``), not the full ``mjx.Data``, whose contact buffers can be large.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nnx_ppo.algorithms.module_scan import eval_copy, scan_with_modules
from nnx_ppo.algorithms.streams import sum_leaves
from nnx_ppo.algorithms.types import RLEnv
from nnx_ppo.networks.base import StatefulModule

_SLIM_FIELDS = ("qpos", "qvel", "time", "mocap_pos", "mocap_quat", "xfrc_applied")


class SlimData(NamedTuple):
    """Minimal ``mjx.Data`` fields needed for rendering.

    A field the env's data lacks (e.g. the built-in pure-JAX envs, which have no MuJoCo
    model) is None; such states cannot be rendered.
    """

    qpos: Any
    qvel: Any
    time: Any
    mocap_pos: Any
    mocap_quat: Any
    xfrc_applied: Any


class SlimState(NamedTuple):
    """Minimal env state for rendering, avoiding large ``mjx.Data`` contact buffers.

    ``env.render`` reads ``state.data.{qpos, qvel, mocap_pos, mocap_quat, xfrc_applied}``.
    """

    data: SlimData
    done: Any
    info: Any
    metrics: Any


def slim_state(env_state: Any) -> SlimState:
    """The ``SlimState`` of an env state (any leading batch or time axes are kept)."""
    data = SlimData(*(getattr(env_state.data, name, None) for name in _SLIM_FIELDS))
    return SlimState(data, env_state.done, env_state.info, env_state.metrics)


def _where(cond: jax.Array, on_true: Any, on_false: Any) -> Any:
    return jax.tree.map(lambda a, b: jnp.where(cond, a, b), on_true, on_false)


def eval_rollout_for_render_scan(
    env: RLEnv, networks: StatefulModule, max_episode_length: int, key: jax.Array
) -> tuple[SlimState, SlimState, jax.Array]:
    """JIT-compatible scan-based rollout of one deterministic episode in a single env.

    The policy runs in eval mode (the mean action) on a copy of ``networks``; the module
    passed in is left as it was. The env is unbatched (``env.reset``/``env.step`` are not
    vmapped); the network sees a batch of one. Once the episode is done the env state is
    frozen: later steps neither change it nor add reward.

    ``env``, ``networks`` and ``max_episode_length`` must be static; jit over the key::

        rollout = jax.jit(
            functools.partial(eval_rollout_for_render_scan, env, networks, max_episode_length)
        )
        stacked, final, total_reward = rollout(key)
        frames = env.render(unstack_trajectory(stacked, final, max_episode_length))

    (the network's parameters are then constants of the compiled function: build the
    partial again after they change).

    Args:
        env: A single, unbatched env.
        networks: The actor-critic ``StatefulModule`` (batched).
        max_episode_length: Number of steps ``T`` the scan runs.
        key: Key for ``env.reset``.

    Returns:
        ``(stacked_states, final_state, total_reward)``: ``stacked_states`` has leaves
        ``[T, ...]``, where entry ``t`` is the state after ``t`` steps (entry 0 is the reset
        state); ``final_state`` is the state after ``T`` steps (or the first done state);
        ``total_reward`` is the scalar sum of rewards up to and including the first step that
        ended the episode.

    Raises:
        ValueError: If ``max_episode_length`` is not a positive int.
    """
    is_int = isinstance(max_episode_length, int) and not isinstance(max_episode_length, bool)
    if not is_int or max_episode_length <= 0:
        raise ValueError(f"max_episode_length must be a positive int, got {max_episode_length!r}")
    module = eval_copy(networks)  # eval() must not reach the caller's module
    key_reset, _ = jax.random.split(key)
    env_state = env.reset(key_reset)
    network_state = module.initialize_state(1)

    def body(m: Any, carry: tuple[Any, ...], _: Any) -> tuple[tuple[Any, ...], SlimState]:
        env_s, net_s, done, total = carry
        obs = jax.tree.map(lambda x: x[None], env_s.obs)
        out = m(net_s, obs)
        stepped = env.step(env_s, jax.tree.map(lambda a: a[0], out.output.actions))
        total = total + jnp.where(done, 0.0, sum_leaves(jax.tree.leaves(stepped.reward)))
        next_env_s = _where(done, env_s, stepped)
        done = jnp.logical_or(done, stepped.done > 0.5)
        return (next_env_s, out.next_state, done, total), slim_state(env_s)

    init = (env_state, network_state, jnp.asarray(False), jnp.zeros((), jnp.float32))
    final, stacked, _ = scan_with_modules(body, module, init, length=max_episode_length)
    final_env_state, _, _, total_reward = final
    return stacked, slim_state(final_env_state), total_reward


def unstack_trajectory(
    stacked_states: SlimState, final_state: SlimState, max_episode_length: int
) -> list[SlimState]:
    """Converts stacked states from the scan into a list for rendering (host code, not jit).

    The list starts with the reset state and stops after the first done state; when no
    state in ``stacked_states`` is done, ``final_state`` ends it. Leaves are NumPy arrays.

    Args:
        stacked_states: ``[T, ...]`` states from ``eval_rollout_for_render_scan``.
        final_state: Its final state.
        max_episode_length: ``T``.

    Returns:
        At most ``T + 1`` ``SlimState``s, one per frame.
    """
    stacked, final = jax.device_get((stacked_states, final_state))
    length = min(int(max_episode_length), int(np.shape(stacked.done)[0]))
    trajectory = []
    for t in range(length):
        state = jax.tree.map(lambda x, t=t: x[t], stacked)
        trajectory.append(state)
        if float(state.done) > 0.5:
            return trajectory
    trajectory.append(final)
    return trajectory
