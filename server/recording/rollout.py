"""The recording rollout, in chunks: ``N`` envs for ``T`` steps of a checkpoint's network
in eval mode (deterministic actions), made recordable with ``with_recording``
(``server.spec.checkpoint_network.recordable``).

It is ``record_activations_rollout``'s rollout (the same env resets for the same key, the
same steps, the same activations) cut into jitted chunks of ``C`` steps whose carry (env
states, network states, the network's variables) passes from one chunk to the next, so the
host holds one chunk at a time. Unlike it, an env whose episode ends is reset (with a key
folded from the step) and its network state reset with it, as in training: the ``T`` steps
may hold several episodes per env, and the pre-step ``dones`` marks where each new one
begins. Up to the first episode end the two rollouts are the same.

Everything here imports JAX: only the recording job's child process uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from nnx_ppo.algorithms.module_scan import scan_with_modules
from nnx_ppo.algorithms.render_rollout import SlimState, slim_state
from nnx_ppo.algorithms.rollout import reset_done, tree_where
from nnx_ppo.networks.recording import activations_from_metrics


class RolloutCarry(NamedTuple):
    """What passes from one chunk to the next (``[N]`` leading axes but ``module``)."""

    env_state: Any
    network_state: Any
    ended: jax.Array
    """``[N]``: the episode ended at the previous step (the env was reset since)."""
    module: Any
    """The recordable network's ``nnx.State``."""


class ChunkOutput(NamedTuple):
    """One chunk's steps, ``[C, N, ...]`` (``frames``: env 0 only, ``[C, ...]``)."""

    activations: dict[str, jax.Array]
    dones: jax.Array
    obs: Any
    actions: jax.Array
    rewards: Any
    frames: SlimState | None


def initial_carry(env: Any, recorder: Any, n_envs: int, key: jax.Array) -> RolloutCarry:
    """The reset states of ``record_activations_rollout`` for ``key``."""
    key_reset, _ = jax.random.split(key)
    env_state = jax.vmap(env.reset)(jax.random.split(key_reset, n_envs))
    network_state = recorder.initialize_state(n_envs)
    ended = jnp.zeros((n_envs,), bool)
    return RolloutCarry(env_state, network_state, ended, nnx.state(recorder))


def chunk_function(
    env: Any, recorder: Any, chunk_steps: int, key: jax.Array, *, frames: bool
) -> Callable[[RolloutCarry, jax.Array], tuple[RolloutCarry, ChunkOutput]]:
    """``run(carry, t0) -> (carry, output)``: steps ``t0 .. t0 + chunk_steps``, jitted.

    Args:
        env: The unbatched env (vmapped here).
        recorder: ``recordable(network)``; its graph definition is static.
        chunk_steps: ``C``, steps per call.
        key: The recording's key; resets after an episode end use keys folded from its
            second half and the step.
        frames: Whether to return env 0's states for rendering.
    """
    graphdef = nnx.graphdef(recorder)
    _, key_resets = jax.random.split(key)

    def body(m: Any, carry: tuple[Any, Any, jax.Array], t: jax.Array) -> tuple[Any, Any]:
        env_s, net_s, ended = carry
        out = m(net_s, env_s.obs)
        stepped = jax.vmap(env.step)(env_s, out.output.actions)
        done = stepped.done > 0.5
        step = ChunkOutput(
            activations=activations_from_metrics(out.metrics),
            dones=ended,
            obs=env_s.obs,
            actions=out.output.actions,
            rewards=stepped.reward,
            frames=slim_state(jax.tree.map(lambda x: x[0], env_s)) if frames else None,
        )
        next_env = reset_done(env, stepped, done, jax.random.fold_in(key_resets, t))
        next_net = tree_where(done, m.reset_state(out.next_state), out.next_state)
        return (next_env, next_net, done), step

    def run(carry: RolloutCarry, t0: jax.Array) -> tuple[RolloutCarry, ChunkOutput]:
        live = nnx.merge(graphdef, carry.module)
        init = (carry.env_state, carry.network_state, carry.ended)
        steps = t0 + jnp.arange(chunk_steps)
        (env_s, net_s, ended), ys, module = scan_with_modules(body, live, init, xs=steps)
        return RolloutCarry(env_s, net_s, ended, module), ys

    return jax.jit(run)


def named_leaves(prefix: str, tree: Any) -> dict[str, Any]:
    """``{prefix: array}`` for an array, ``{prefix/key: array}`` for a dict of them."""
    if isinstance(tree, Mapping):
        return {f"{prefix}/{k}": v for k, v in sorted(tree.items())}
    return {prefix: tree}


def host_arrays(output: ChunkOutput) -> dict[str, np.ndarray]:
    """A chunk's arrays on the host, by their recording names (activations as float32)."""
    from server.recording.storage import activation_name

    output = jax.device_get(output)
    arrays: dict[str, np.ndarray] = {
        activation_name(k): np.asarray(v, np.float32) for k, v in output.activations.items()
    }
    arrays["dones"] = np.asarray(output.dones, bool)
    arrays.update({k: np.asarray(v) for k, v in named_leaves("obs", output.obs).items()})
    arrays["actions"] = np.asarray(output.actions)
    arrays.update({k: np.asarray(v) for k, v in named_leaves("rewards", output.rewards).items()})
    return arrays
