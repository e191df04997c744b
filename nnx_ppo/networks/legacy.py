"""The ``PPONetwork`` layout that ``make_mlp_actor_critic`` and ``make_lstm_actor_critic``
built before they became compositions of the toolkit's parts, kept to read the checkpoints
written then.

``legacy_renames`` pairs each variable-path prefix of that layout with its place in the
composed network (``composed.compose_mlp_actor_critic``, ``compose_lstm_actor_critic``) and
``legacy_carry`` moves an old network's carry into the composed one's;
``nnx_ppo.algorithms.checkpointing`` translates an old checkpoint with them at load.
``ppo_network_mlp_actor_critic`` and ``ppo_network_lstm_actor_critic`` build the old layout
itself: the references the tests compare the compositions with (same seed, same parameters,
same losses) and write old checkpoints with. Nothing else builds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
from flax import nnx

from nnx_ppo.networks import factories
from nnx_ppo.networks.actor_critic import PPONetwork, key_slice
from nnx_ppo.networks.adapter import PPOAdapter
from nnx_ppo.networks.containers import Sequential
from nnx_ppo.networks.feedforward import Dense
from nnx_ppo.networks.layers import LSTM as LegacyLSTM
from nnx_ppo.networks.layers import MLP
from nnx_ppo.networks.layers import Sequential as LegacySequential
from nnx_ppo.networks.normalizer import Normalizer, flat_size, obs_shapes
from nnx_ppo.networks.precision import DEFAULT_PRECISION, check_precision
from nnx_ppo.networks.recurrent import LSTM
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


def ppo_network_lstm_actor_critic(
    obs_size: Any,
    action_size: int,
    *,
    rngs: nnx.Rngs,
    lstm_size: int = 64,
    actor_hidden_sizes: Sequence[int] = (64,),
    critic_hidden_sizes: Sequence[int] = (64,),
    normalize_obs: bool = True,
    activation: str = "swish",
    entropy_weight: float = 1e-2,
    min_std: float = 1e-3,
    reward_streams: Sequence[str] | None = None,
    precision: str = DEFAULT_PRECISION,
) -> PPONetwork:
    """``make_lstm_actor_critic``'s network in the old ``PPONetwork`` layout (each side a
    ``layers.Sequential(layers.LSTM, layers.MLP)``; a reference for tests, carrying the
    factory's recipe)."""
    precision = check_precision(precision)
    n_in = flat_size(obs_size)
    streams = factories._check_streams(reward_streams)

    def side(out_size: int, hidden: Sequence[int], last_layer_scale: float) -> Any:
        lstm = LegacyLSTM(n_in, lstm_size, rngs=rngs, precision=precision)
        mlp = MLP(
            (lstm_size, *hidden, out_size),
            rngs=rngs,
            activation=activation,
            last_layer_scale=last_layer_scale,
            precision=precision,
        )
        return LegacySequential(lstm, mlp)

    actor = side(2 * action_size, actor_hidden_sizes, 0.01)
    critic = side(len(streams or (0,)), critic_hidden_sizes, 1.0)
    network = factories._assemble(
        obs_size, action_size, actor, critic, rngs, normalize_obs, entropy_weight, min_std, streams
    )
    built = factories.make_lstm_actor_critic(
        obs_size,
        action_size,
        rngs=nnx.Rngs(0),
        lstm_size=lstm_size,
        actor_hidden_sizes=actor_hidden_sizes,
        critic_hidden_sizes=critic_hidden_sizes,
        normalize_obs=normalize_obs,
        activation=activation,
        entropy_weight=entropy_weight,
        min_std=min_std,
        reward_streams=reward_streams,
        precision=precision,
    )
    network.recipe = getattr(built, "recipe", None)
    return network


def legacy_renames(network: Any) -> tuple[tuple[Path, Path], ...] | None:
    """``((old prefix, new prefix), ...)``: where each variable of the old ``PPONetwork``
    layout lives in ``network``, a composed MLP or LSTM actor-critic (``[Normalizer ->]
    [Flattener ->] PPOAdapter`` whose ports are ``Dense`` stacks, each after an ``LSTM`` in
    the LSTM's case, the action port ending with a ``NormalTanhSampler``); None for any
    other network.

    MLP: old ``actor/layers/i`` is the action port's i-th ``Dense``, ``critic/layers/i`` the
    value port's. LSTM: old ``actor/modules/0`` (its ``gates``) is the action port's
    ``LSTM``'s ``cell``, ``actor/modules/1/layers/i`` the port's i-th ``Dense``; likewise
    ``critic``. Both: ``sampler`` is the action port's sampler, ``normalizer`` the
    ``Normalizer``.
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
        new_port: Path = ("layers", last, port_name, "layers")
        dense = [j for j, layer in enumerate(port.layers) if isinstance(layer, Dense)]
        lstms = [j for j, layer in enumerate(port.layers) if isinstance(layer, LSTM)]
        if len(lstms) > 1 or (lstms and lstms[0] > min(dense, default=0)):
            return None
        old_dense: Path = (old, "modules", 1, "layers") if lstms else (old, "layers")
        renames += [((old, "modules", 0), (*new_port, lstms[0], "cell"))] if lstms else []
        renames += [((*old_dense, k), (*new_port, j)) for k, j in enumerate(dense)]
    action_layers = getattr(adapter.action, "layers", [])
    samplers = [j for j, layer in enumerate(action_layers) if isinstance(layer, NormalTanhSampler)]
    if len(samplers) != 1:
        return None
    renames.append((("sampler",), ("layers", last, "action", "layers", samplers[0])))
    return tuple(renames)


def legacy_carry(network: Any, stored: Any) -> Any:
    """An old ``PPONetwork``'s carry ``{"actor": ..., "critic": ...}`` as the carry of
    ``network`` (composed as ``legacy_renames`` reads it), or None when it does not fit.

    An MLP's sides carry nothing; an LSTM side carries ``((h, c), ())``, which becomes its
    port's ``LSTM`` carry ``(c, h)`` (every other layer's carry is its initial one).
    """
    init = getattr(network, "initialize_state", None)
    if not isinstance(stored, dict) or set(stored) != {"actor", "critic"} or init is None:
        return None
    leaves = jax.tree.leaves(stored)
    if not leaves:
        return None if jax.tree.leaves(init(1)) else init(1)
    carry = init(leaves[0].shape[0])
    adapter = network.layers[-1]
    for old, port_name in (("actor", "action"), ("critic", "value")):
        port = getattr(adapter, port_name)
        lstms = [j for j, layer in enumerate(port.layers) if isinstance(layer, LSTM)]
        side = stored[old]
        if len(lstms) != 1 or not isinstance(side, tuple | list) or len(side) != 2:
            return None
        h, c = side[0]
        carry[-1][port_name][lstms[0]] = (c, h)
    return carry


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
