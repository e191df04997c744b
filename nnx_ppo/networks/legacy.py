"""The ``PPONetwork`` layout that ``make_mlp_actor_critic`` built before it became a
composition of the toolkit's parts, kept to read the checkpoints written then.

``legacy_renames`` pairs each variable-path prefix of that layout with its place in the
composed network (``composed.compose_mlp_actor_critic``); ``nnx_ppo.algorithms.checkpointing``
translates an old checkpoint's paths with it at load. ``ppo_network_mlp_actor_critic``
builds the old layout itself: the reference the tests compare the composition with (same
seed, same parameters, same losses) and write old checkpoints with. Nothing else builds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flax import nnx

from nnx_ppo.networks import factories
from nnx_ppo.networks.actor_critic import PPONetwork, key_slice
from nnx_ppo.networks.adapter import PPOAdapter
from nnx_ppo.networks.containers import Sequential
from nnx_ppo.networks.feedforward import Dense
from nnx_ppo.networks.layers import MLP
from nnx_ppo.networks.normalizer import Normalizer, flat_size, obs_shapes
from nnx_ppo.networks.precision import DEFAULT_PRECISION, check_precision
from nnx_ppo.networks.sampling_layers import NormalTanhSampler

Path = tuple[str | int, ...]

LEGACY_ROOTS = frozenset({"actor", "critic", "sampler"})
"""The top-level names of an old ``PPONetwork``'s variables (with ``normalizer``)."""


def ppo_network_mlp_actor_critic(
    obs_size: Any,
    action_size: int,
    actor_hidden_sizes: Sequence[int] = (64, 64),
    critic_hidden_sizes: Sequence[int] = (256, 256),
    *,
    rngs: nnx.Rngs,
    activation: str = "swish",
    normalize_obs: bool = True,
    initializer_scale: float = 1.0,
    entropy_weight: float = 1e-2,
    min_std: float = 1e-3,
    std_scale: float = 1.0,
    reward_streams: Sequence[str] | None = None,
    policy_obs_key: str | None = None,
    value_obs_key: str | None = None,
    precision: str = DEFAULT_PRECISION,
) -> PPONetwork:
    """``make_mlp_actor_critic``'s network in the old ``PPONetwork`` layout (a reference
    for tests; the arguments are the factory's, and so is the recipe it carries)."""
    precision = check_precision(precision)
    keys = factories._obs_keys(obs_size, policy_obs_key, value_obs_key)
    n_actor_in = n_critic_in = flat_size(obs_size)
    if keys is not None:
        shapes = obs_shapes(obs_size)
        start, stop = key_slice(shapes, keys[0], "policy_obs_key")
        n_actor_in = stop - start
        start, stop = key_slice(shapes, keys[1], "value_obs_key")
        n_critic_in = stop - start
    streams = factories._check_streams(reward_streams)
    common: dict[str, Any] = {
        "rngs": rngs,
        "activation": activation,
        "initializer_scale": initializer_scale,
    }
    actor = MLP(
        (n_actor_in, *actor_hidden_sizes, 2 * action_size),
        last_layer_scale=0.01,
        precision=precision,
        **common,
    )
    critic = MLP(
        (n_critic_in, *critic_hidden_sizes, len(streams or (0,))), precision=precision, **common
    )
    network = factories._assemble(
        obs_size,
        action_size,
        actor,
        critic,
        rngs,
        normalize_obs,
        entropy_weight,
        min_std,
        streams,
        obs_keys=keys,
        std_scale=std_scale,
    )
    built = factories.make_mlp_actor_critic(
        obs_size,
        action_size,
        actor_hidden_sizes,
        critic_hidden_sizes,
        nnx.Rngs(0),
        activation,
        normalize_obs,
        initializer_scale,
        entropy_weight,
        min_std,
        std_scale,
        reward_streams=reward_streams,
        policy_obs_key=policy_obs_key,
        value_obs_key=value_obs_key,
        precision=precision,
    )
    network.recipe = getattr(built, "recipe", None)
    return network


def legacy_renames(network: Any) -> tuple[tuple[Path, Path], ...] | None:
    """``((old prefix, new prefix), ...)``: where each variable of the old ``PPONetwork``
    layout lives in ``network``, a composed MLP actor-critic (``[Normalizer ->] [Flattener
    ->] PPOAdapter`` whose ports are ``Dense`` stacks, the action port ending with a
    ``NormalTanhSampler``); None for any other network.

    Old ``actor/layers/i`` is the action port's i-th ``Dense``, ``critic/layers/i`` the
    value port's, ``sampler`` the action port's sampler, ``normalizer`` the ``Normalizer``.
    """
    if not isinstance(network, Sequential):
        return None
    last = len(network.layers) - 1
    adapter = network.layers[last]
    if not isinstance(adapter, PPOAdapter):
        return None
    renames: list[tuple[Path, Path]] = [
        (("normalizer",), ("layers", i))
        for i, layer in enumerate(network.layers)
        if isinstance(layer, Normalizer)
    ]
    for old, port_name in (("actor", "action"), ("critic", "value")):
        port = getattr(adapter, port_name)
        if not isinstance(port, Sequential):
            return None
        dense = [j for j, layer in enumerate(port.layers) if isinstance(layer, Dense)]
        renames += [
            ((old, "layers", k), ("layers", last, port_name, "layers", j))
            for k, j in enumerate(dense)
        ]
    action_layers = getattr(adapter.action, "layers", [])
    samplers = [j for j, layer in enumerate(action_layers) if isinstance(layer, NormalTanhSampler)]
    if len(samplers) != 1:
        return None
    renames.append((("sampler",), ("layers", last, "action", "layers", samplers[0])))
    return tuple(renames)


def rename_path(path: Path, renames: tuple[tuple[Path, Path], ...], *, to_old: bool) -> Path:
    """``path`` with the first prefix of ``renames`` found in it (anywhere: an optimizer's
    paths hold the network's below their own) replaced: new by old when ``to_old``, else
    old by new. Paths that hold none stay."""
    for start in range(len(path)):
        for old, new in renames:
            src, dst = (new, old) if to_old else (old, new)
            if tuple(map(str, path[start : start + len(src)])) == tuple(map(str, src)):
                return (*path[:start], *dst, *path[start + len(src) :])
    return path


def rename_tree(tree: Any, renames: tuple[tuple[Path, Path], ...] | None, *, to_old: bool) -> Any:
    """A nested dict (``nnx.to_pure_dict``'s form) with its leaves' paths renamed."""
    if renames is None or not tree:
        return tree
    out: dict[Any, Any] = {}
    for path, leaf in _flat(tree, ()):
        node = out
        renamed = rename_path(path, renames, to_old=to_old)
        for key in renamed[:-1]:
            node = node.setdefault(key, {})
        node[renamed[-1]] = leaf
    return out


def _flat(tree: Any, prefix: Path) -> list[tuple[Path, Any]]:
    if isinstance(tree, dict) and tree:
        return [item for key, sub in tree.items() for item in _flat(sub, (*prefix, key))]
    return [(prefix, tree)]
