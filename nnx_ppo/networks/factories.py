"""Factories that build the actor-critic networks the service and the examples use.

Both take the run spec's ``network`` fields (minus ``kind``) as keyword arguments; a plugin
network (``kind = "plugin:<name>"``, ``nnx_ppo.plugins``) takes its spec's ``kwargs``. Each
network they build carries its recipe (``recipe_of``): the factory and the arguments that
built it, which a checkpoint records so that ``rebuild`` can make the network again
without a template (``nnx_ppo.policy.load``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from flax import nnx

from nnx_ppo import plugins
from nnx_ppo.networks import graph_spec
from nnx_ppo.networks.actor_critic import AsymmetricPPONetwork, PPONetwork, key_slice
from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.networks.composed import (  # make_mlp*: the interface's
    compose_lstm_actor_critic,
    compose_mlp_actor_critic,
    make_mlp,  # noqa: F401
    make_mlp_layers,  # noqa: F401
)
from nnx_ppo.networks.containers import Sequential as ComposedSequential
from nnx_ppo.networks.normalizer import Normalizer, obs_shapes
from nnx_ppo.networks.precision import DEFAULT_PRECISION, check_precision
from nnx_ppo.networks.samplers import TanhNormalSampler


def _check_sizes(name: str, sizes: Sequence[int]) -> tuple[int, ...]:
    try:
        sizes = tuple(int(s) for s in sizes)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a list of positive integers, got {sizes!r}") from None
    if any(s <= 0 for s in sizes):
        raise ValueError(f"{name} must be a list of positive integers, got {list(sizes)}")
    return sizes


def _check_obs_size(obs_size: Any) -> Any:
    """``obs_size`` must be a positive int, a shape of positive ints, or a dict of those."""

    def valid_shape(size: Any) -> bool:
        if _is_int(size):
            return size > 0
        return (
            isinstance(size, tuple | list)
            and len(size) > 0
            and all(_is_int(d) and d > 0 for d in size)
        )

    ok = valid_shape(obs_size) or (
        isinstance(obs_size, dict) and obs_size and all(valid_shape(v) for v in obs_size.values())
    )
    if not ok:
        raise ValueError(
            "obs_size must be a positive int, a shape of positive ints, or a dict of them, "
            f"got {obs_size!r}"
        )
    return obs_size


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_action_size(action_size: int) -> int:
    if not _is_int(action_size) or action_size <= 0:
        raise ValueError(f"action_size must be a positive integer, got {action_size!r}")
    return action_size


def make_mlp_actor_critic(
    obs_size: Any,
    action_size: int,
    actor_hidden_sizes: Sequence[int] = (64, 64),
    critic_hidden_sizes: Sequence[int] = (256, 256),
    rngs: nnx.Rngs | None = None,
    activation: str = "swish",
    normalize_obs: bool = True,
    initializer_scale: float = 1.0,
    entropy_weight: float = 1e-2,
    min_std: float = 1e-3,
    std_scale: float = 1.0,
    *,
    reward_streams: Sequence[str] | None = None,
    policy_obs_key: str | None = None,
    value_obs_key: str | None = None,
    precision: str = DEFAULT_PRECISION,
) -> ComposedSequential:
    """A feed-forward actor-critic: separate MLPs for the policy and the value, composed of
    the toolkit's parts (``composed.compose_mlp_actor_critic``): ``[Normalizer ->]
    [Flattener ->] PPOAdapter(action=Sequential([Dense..., NormalTanhSampler]),
    value=Sequential([Dense...]))``.

    With dict observations, ``policy_obs_key`` / ``value_obs_key`` make it asymmetric
    (each port starts with a ``Filter`` of its key): the policy reads only that key (e.g.
    ``"state"``), the value only its own (e.g. ``"privileged_state"``). Like Brax's
    ``policy_obs_key`` / ``value_obs_key``, they are ignored for array observations, so one
    preset fits an env whatever its observation is; unset, both read every key.

    The first eleven arguments may be given by position, in the order of
    ``networks-api.md`` (``obs_size, action_size, actor_hidden_sizes, critic_hidden_sizes,
    rngs, activation, normalize_obs, initializer_scale, entropy_weight, min_std,
    std_scale``); the defaults are this project's. Checkpoints written when it built a
    ``PPONetwork`` load into it (``nnx_ppo.networks.legacy``).

    Args:
        obs_size: The env's ``observation_size`` (int, shape, or dict of shapes).
        action_size: The env's ``action_size``.
        rngs: Streams ``params`` (initialization) and ``action`` (sampling); a plain
            ``nnx.Rngs(seed)`` provides both.
        actor_hidden_sizes: Hidden layer widths of the policy MLP.
        critic_hidden_sizes: Hidden layer widths of the value MLP.
        normalize_obs: Standardize observations with running statistics.
        activation: Hidden activation name (``swish``, ``relu``, ``tanh``, ``elu``, ``gelu``).
        initializer_scale: Multiplies every layer's initial (Lecun-uniform) weights.
        entropy_weight: Weight of the policy's entropy bonus.
        min_std: Floor of the policy's standard deviation.
        std_scale: Multiplies the softplus of the policy's raw standard deviation.
        reward_streams: Names of the env's reward streams when its reward is a dict: one
            value head each (``value_estimates`` is then a dict). None: one value.
        policy_obs_key: The dict-observation key the policy reads (None: all keys).
        value_obs_key: The dict-observation key the value reads (None: all keys).
        precision: ``"float32"`` or ``"bfloat16"``: the arithmetic of the MLPs' matrix
            products (``nnx_ppo.networks.precision``; parameters stay float32).
    """
    rngs = _check_rngs(rngs)
    obs_size = _check_obs_size(obs_size)
    action_size = _check_action_size(action_size)
    actor_hidden = _check_sizes("actor_hidden_sizes", actor_hidden_sizes)
    critic_hidden = _check_sizes("critic_hidden_sizes", critic_hidden_sizes)
    initializer_scale = _check_positive("initializer_scale", initializer_scale)
    std_scale = _check_positive("std_scale", std_scale)
    precision = check_precision(precision)
    keys = _obs_keys(obs_size, policy_obs_key, value_obs_key)
    if keys is not None:
        for key, field in zip(keys, ("policy_obs_key", "value_obs_key"), strict=True):
            key_slice(obs_shapes(obs_size), key, field)  # a ValueError naming a missing key
    streams = _check_streams(reward_streams)
    network = compose_mlp_actor_critic(
        obs_size,
        action_size,
        actor_hidden,
        critic_hidden,
        rngs,
        activation,
        normalize_obs,
        initializer_scale,
        entropy_weight,
        min_std,
        std_scale,
        reward_streams=streams,
        obs_keys=keys,
        precision=precision,
    )
    fields = {
        "actor_hidden_sizes": actor_hidden,
        "critic_hidden_sizes": critic_hidden,
        "normalize_obs": normalize_obs,
        "activation": activation,
        "entropy_weight": entropy_weight,
        "min_std": min_std,
        "reward_streams": streams,
        "policy_obs_key": policy_obs_key,
        "value_obs_key": value_obs_key,
        "precision": precision,
    }
    # Recorded only when set, so that the recipes (and the programs) of networks built
    # before these arguments existed stay as they were.
    fields |= {
        name: value
        for name, value in (("initializer_scale", initializer_scale), ("std_scale", std_scale))
        if value != 1.0
    }
    return _with_recipe(network, "mlp", obs_size, action_size, fields)


def _check_rngs(rngs: Any) -> nnx.Rngs:
    if not isinstance(rngs, nnx.Rngs):
        raise ValueError(f"rngs must be an nnx.Rngs (e.g. nnx.Rngs(0)), got {rngs!r}")
    return rngs


def _check_positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def _obs_keys(
    obs_size: Any, policy_obs_key: str | None, value_obs_key: str | None
) -> tuple[str, str] | None:
    """The (policy, value) keys when the network is asymmetric, else None."""
    for field, key in (("policy_obs_key", policy_obs_key), ("value_obs_key", value_obs_key)):
        if key is not None and not isinstance(key, str):
            raise ValueError(f"{field} must be a string or None, got {key!r}")
    if not isinstance(obs_size, dict) or (policy_obs_key is None and value_obs_key is None):
        return None
    if policy_obs_key is None or value_obs_key is None:
        raise ValueError(
            "policy_obs_key and value_obs_key must be given together, got "
            f"policy_obs_key={policy_obs_key!r}, value_obs_key={value_obs_key!r}"
        )
    return policy_obs_key, value_obs_key


def make_lstm_actor_critic(
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
) -> ComposedSequential:
    """A recurrent actor-critic: policy and value each read an LSTM of their own, composed
    of the toolkit's parts (``composed.compose_lstm_actor_critic``): ``[Normalizer ->]
    Flattener -> PPOAdapter(action=Sequential([LSTM, Dense..., NormalTanhSampler]),
    value=Sequential([LSTM, Dense...]))``.

    Each LSTM's carry ``(c, h)`` is reset where an episode ends, during rollouts and during
    the loss replay. Checkpoints written when it built a ``PPONetwork`` load into it
    (``nnx_ppo.networks.legacy``).

    Args:
        obs_size: The env's ``observation_size`` (int, shape, or dict of shapes).
        action_size: The env's ``action_size``.
        rngs: Streams ``params`` and ``action``; ``nnx.Rngs(seed)`` provides both.
        lstm_size: Units of each LSTM.
        actor_hidden_sizes: Hidden widths of the MLP after the policy's LSTM (may be empty).
        critic_hidden_sizes: Hidden widths of the MLP after the value's LSTM (may be empty).
        normalize_obs: Standardize observations with running statistics.
        activation: Hidden activation name.
        entropy_weight: Weight of the policy's entropy bonus.
        min_std: Floor of the policy's standard deviation.
        reward_streams: Names of the env's reward streams when its reward is a dict: one
            value head each (``value_estimates`` is then a dict). None: one value.
        precision: ``"float32"`` or ``"bfloat16"``: the arithmetic of the LSTMs' and the
            MLPs' matrix products (``nnx_ppo.networks.precision``).
    """
    obs_size = _check_obs_size(obs_size)
    action_size = _check_action_size(action_size)
    precision = check_precision(precision)
    if not _is_int(lstm_size) or lstm_size <= 0:
        raise ValueError(f"lstm_size must be a positive integer, got {lstm_size!r}")
    actor_hidden = _check_sizes("actor_hidden_sizes", actor_hidden_sizes)
    critic_hidden = _check_sizes("critic_hidden_sizes", critic_hidden_sizes)
    streams = _check_streams(reward_streams)
    network = compose_lstm_actor_critic(
        obs_size,
        action_size,
        rngs=_check_rngs(rngs),
        lstm_size=lstm_size,
        actor_hidden_sizes=actor_hidden,
        critic_hidden_sizes=critic_hidden,
        normalize_obs=normalize_obs,
        activation=activation,
        entropy_weight=entropy_weight,
        min_std=min_std,
        reward_streams=streams,
        precision=precision,
    )
    fields = {
        "lstm_size": lstm_size,
        "actor_hidden_sizes": actor_hidden,
        "critic_hidden_sizes": critic_hidden,
        "normalize_obs": normalize_obs,
        "activation": activation,
        "entropy_weight": entropy_weight,
        "min_std": min_std,
        "reward_streams": streams,
        "precision": precision,
    }
    return _with_recipe(network, "lstm", obs_size, action_size, fields)


def _assemble(
    obs_size: Any,
    action_size: int,
    actor: Any,
    critic: Any,
    rngs: nnx.Rngs,
    normalize_obs: bool,
    entropy_weight: float,
    min_std: float,
    reward_streams: tuple[str, ...] | None = None,
    obs_keys: tuple[str, str] | None = None,
    std_scale: float = 1.0,
) -> PPONetwork:
    sampler = TanhNormalSampler(
        action_size,
        rngs=rngs,
        entropy_weight=entropy_weight,
        min_std=min_std,
        std_scale=std_scale,
    )
    normalizer = Normalizer(obs_size) if normalize_obs else None
    if obs_keys is not None:
        return AsymmetricPPONetwork(
            actor,
            critic,
            sampler,
            normalizer,
            obs_shapes(obs_size),
            value_streams=reward_streams,
            policy_obs_key=obs_keys[0],
            value_obs_key=obs_keys[1],
        )
    return PPONetwork(
        actor, critic, sampler, normalizer, obs_shapes(obs_size), value_streams=reward_streams
    )


def _check_streams(streams: Sequence[str] | None) -> tuple[str, ...] | None:
    """``reward_streams`` as a tuple of distinct non-empty names (None stays None)."""
    if streams is None:
        return None
    ok = not isinstance(streams, str) and all(isinstance(n, str) and n for n in streams)
    names = tuple(streams) if ok else ()
    if not names or len(set(names)) != len(names):
        raise ValueError(
            f"reward_streams must be None or a list of distinct stream names, got {streams!r}"
        )
    return names


# --- Recipes: what rebuilds a network -------------------------------------------------------


def make_graph_network(obs_size: Any, action_size: Any, *, rngs: nnx.Rngs, **fields: Any) -> Any:
    """A population-graph actor-critic from its JSON description (``fields``: the keyword
    arguments of ``graph_spec.make_graph_actor_critic``), carrying its recipe."""
    network = graph_spec.make_graph_actor_critic(obs_size, action_size, rngs=rngs, **fields)
    return _with_recipe(network, "graph", obs_size, action_size, fields)


FACTORIES: dict[str, Callable[..., Any]] = {
    "mlp": make_mlp_actor_critic,
    "lstm": make_lstm_actor_critic,
    "graph": make_graph_network,
}
"""The factories by the ``kind`` a run spec's ``network`` names them with."""


def make_plugin_network(
    name: str, obs_size: Any, action_size: int, *, rngs: Any, **kwargs: Any
) -> Any:
    """The network made by plugin network ``name``'s factory (arguments checked first).

    Raises:
        As ``nnx_ppo.plugins.make_env``; PluginUnavailable also when the factory returns
        something that is not a ``StatefulModule``.
    """
    factory = plugins.load_factory(plugins.NETWORK_GROUP, name)
    what = f"plugin network {name!r}"
    plugins.check_arguments(what, factory, kwargs, positional=2, reserved=("rngs",))
    network = plugins.call_factory(what, factory, (obs_size, action_size), {"rngs": rngs, **kwargs})
    if not isinstance(network, StatefulModule):
        raise plugins.PluginUnavailable(
            f"{what} returned a {type(network).__name__}, not a StatefulModule"
        )
    return network


def factory_for(kind: Any) -> Callable[..., Any]:
    """The factory of network ``kind``: one of ``FACTORIES``, or for ``"plugin:<name>"``
    the installed plugin network ``name`` (``make_plugin_network``: arguments checked,
    imported when called), whose networks carry a recipe too.

    Raises:
        ValueError: If ``kind`` is neither.
    """
    if isinstance(kind, str) and kind in FACTORIES:
        return FACTORIES[kind]
    if isinstance(kind, str) and kind.startswith(plugins.KIND_PREFIX):
        name = kind.removeprefix(plugins.KIND_PREFIX)

        def plugin_factory(obs_size: Any, action_size: int, **kwargs: Any) -> Any:
            fields = {k: v for k, v in kwargs.items() if k != "rngs"}
            network = make_plugin_network(name, obs_size, action_size, **kwargs)
            return _with_recipe(network, kind, obs_size, action_size, fields)

        return plugin_factory
    raise ValueError(
        f"network kind must be 'mlp', 'lstm', 'graph' or 'plugin:<name>', got {kind!r}"
    )


_RECIPE_KEYS = {"kind", "obs_size", "action_size", "fields"}


def _with_recipe(
    network: Any, kind: str, obs_size: Any, action_size: Any, fields: dict[str, Any]
) -> Any:
    """``network`` with its recipe as a JSON string (a static attribute of the module, so
    that copies made by ``nnx.split`` / ``nnx.merge`` keep it). A value JSON cannot hold
    leaves the network without a recipe: it then needs a template to be loaded."""
    recipe = {"kind": kind, "obs_size": obs_size, "action_size": action_size, "fields": fields}
    try:
        network.recipe = json.dumps(recipe, sort_keys=True, default=_plain, allow_nan=False)
    except (TypeError, ValueError):
        network.recipe = None
    return network


def _plain(value: Any) -> Any:
    if isinstance(value, np.integer | np.floating | np.bool_):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


def recipe_of(network: Any) -> dict[str, Any] | None:
    """``{"kind", "obs_size", "action_size", "fields"}`` of a network built by a factory
    here (plain data: dicts, lists, strings, numbers), else None."""
    recipe = getattr(network, "recipe", None)
    return json.loads(recipe) if isinstance(recipe, str) else None


def rebuild(recipe: Mapping[str, Any]) -> StatefulModule:
    """A new network made from ``recipe`` (``recipe_of``'s dict), with fresh parameters.

    Raises:
        ValueError: If the recipe is malformed or its factory refuses it (the message
            names what).
    """
    if not isinstance(recipe, Mapping) or set(recipe) != _RECIPE_KEYS:
        raise ValueError(f"malformed network recipe {recipe!r}")
    fields = recipe["fields"]
    try:
        factory = factory_for(recipe["kind"])
    except ValueError:
        factory = None
    if factory is None or not isinstance(fields, Mapping):
        raise ValueError(f"malformed network recipe {dict(recipe)!r}")
    try:
        return factory(recipe["obs_size"], recipe["action_size"], rngs=nnx.Rngs(0), **fields)
    except TypeError as error:  # an argument the factory does not take
        raise ValueError(f"network recipe {dict(recipe)!r} cannot be built: {error}") from None
