"""A run's checkpoint judged with the library: its env and its network (rebuilt from the
checkpoint's recipe, or from the run's spec), and what a recording of it records.

The spec checker answers ``recording_shape`` before a recording is queued (its 422s); the
recording job (``server.recording.job``) loads the same env and network to record them.
Everything here imports JAX when called: only those child processes call it.
"""

from __future__ import annotations

import math
from typing import Any


def load_env(spec: dict[str, Any]) -> Any:
    from nnx_ppo import envs

    return envs.load(spec["env"]["name"], spec["env"].get("overrides") or {})


def load_network(checkpoint: str, spec: dict[str, Any], env: Any) -> Any:
    """The checkpoint's network: rebuilt from its recipe, or from the run's spec for a
    checkpoint that records none; its variables loaded."""
    from nnx_ppo.algorithms.checkpointing import load_networks, read_network_recipe
    from nnx_ppo.networks import factories
    from nnx_ppo.presets import make_networks
    from server.spec.spec_check import spec_network_fields

    network: Any
    recipe = read_network_recipe(checkpoint)
    if recipe is not None:
        network = factories.rebuild(recipe)
    else:
        fields = spec_network_fields(spec, env)
        network = make_networks(fields, env.observation_size, env.action_size, 0)
    load_networks(checkpoint, network)
    return network


def recordable(network: Any) -> Any:
    """An eval-mode, recordable copy of ``network`` (deterministic actions)."""
    from nnx_ppo.networks.recording import with_recording

    recorder: Any = with_recording(network)
    recorder.eval()
    return recorder


def activation_shapes(env: Any, network: Any) -> dict[str, tuple[int, ...]]:
    """Each recorded activation's shape per env (``[units]`` for a layer), traced only."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from nnx_ppo.networks.recording import activations_from_metrics

    recorder = recordable(network)
    graphdef, state = nnx.split(recorder)
    obs = jax.eval_shape(lambda k: env.reset(k).obs, jax.random.key(0))
    batched = jax.tree.map(lambda s: jnp.zeros((1, *s.shape), s.dtype), obs)

    def call(module_state: Any, observation: Any) -> dict[str, Any]:
        m = nnx.merge(graphdef, module_state)
        return activations_from_metrics(m(m.initialize_state(1), observation).metrics)

    shapes = jax.eval_shape(call, state, batched)
    return {k: tuple(int(d) for d in v.shape[1:]) for k, v in shapes.items()}


def activation_units(env: Any, network: Any) -> dict[str, int]:
    """Units per recorded population or module path."""
    return {k: math.prod(shape) for k, shape in activation_shapes(env, network).items()}


def recording_shape(spec: dict[str, Any], checkpoint: str) -> dict[str, Any]:
    """The units per recorded population of a checkpoint's network, and whether its env
    renders (``{"error": message}`` when the env or the network cannot be built)."""
    try:
        env = load_env(spec)
        units = activation_units(env, load_network(checkpoint, spec, env))
    except (ValueError, FileNotFoundError, TypeError, KeyError) as error:
        return {"error": f"{type(error).__name__}: {error}"}
    return {"units": units, "renderable": callable(getattr(env, "render", None))}
