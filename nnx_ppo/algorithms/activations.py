"""Per-unit activations over deterministic episodes, for activation analysis."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from nnx_ppo.algorithms.module_scan import scan_with_modules
from nnx_ppo.algorithms.types import RLEnv
from nnx_ppo.envs.chunked import step_envs
from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.networks.recording import activations_from_metrics, with_recording


def _require_positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def record_activations_rollout(
    env: RLEnv, networks: StatefulModule, n_envs: int, max_episode_length: int, key: jax.Array
) -> tuple[dict[str, jax.Array], jax.Array]:
    """Rolls out one deterministic episode per env and returns per-step unit activations.

    ``networks`` is made recordable with ``with_recording()`` (the original is left
    untouched) and run in eval mode, so the action sampler is deterministic. Each step's
    activations are stacked over time by the scan's ``ys``. Unlike ``eval_rollout``, envs
    are not reset on termination: each env runs a single episode for ``max_episode_length``
    steps, stepping on past its end, so callers should mask out the steps where ``dones`` is
    set. The reset states are those ``eval_rollout`` uses for the same ``key``.

    Traceable: jit it with ``env``, ``networks``, ``n_envs`` and ``max_episode_length``
    static (e.g. ``jax.jit(functools.partial(record_activations_rollout, env, networks,
    n_envs, max_episode_length))``). Memory: ``max_episode_length * n_envs * sum(units)``
    floats on the device; prefer a handful of envs on a small GPU.

    Args:
        env: A single, unbatched env (vmapped here).
        networks: The actor-critic ``StatefulModule``.
        n_envs: Number of envs ``B``.
        max_episode_length: Number of steps ``T``.
        key: Key for the env resets.

    Returns:
        ``(activations, dones)``: ``activations`` maps module paths
        (``layers/2/action/layers/0``, ``layers/2/value/layers/1``, ...; see
        ``nnx_ppo.networks.recording``) to ``[T, B, units]`` arrays; ``dones`` is the
        ``[T, B]`` pre-step mask: ``dones[t, b]`` is True when env ``b``'s episode ended at
        a step before ``t`` (``dones[0]`` is all False).

    Raises:
        ValueError: If ``n_envs`` or ``max_episode_length`` is not a positive int.
    """
    _require_positive_int("n_envs", n_envs)
    _require_positive_int("max_episode_length", max_episode_length)
    recorder: Any = with_recording(networks)
    recorder.eval()
    key_reset, _ = jax.random.split(key)
    env_state = jax.vmap(env.reset)(jax.random.split(key_reset, n_envs))
    network_state = recorder.initialize_state(n_envs)

    def body(m: Any, carry: tuple[Any, ...], _: Any) -> tuple[tuple[Any, ...], Any]:
        env_s, net_s, done = carry
        out = m(net_s, env_s.obs)
        env_s = step_envs(env, env_s, out.output.actions)
        next_done = jnp.logical_or(done, env_s.done > 0.5)
        step = (activations_from_metrics(out.metrics), done)
        return (env_s, out.next_state, next_done), step

    done = jnp.zeros((n_envs,), bool)
    init = (env_state, network_state, done)
    _, (activations, dones), _ = scan_with_modules(body, recorder, init, length=max_episode_length)
    return activations, dones
