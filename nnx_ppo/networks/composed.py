"""The actor-critics of ``factories.make_mlp_actor_critic`` and ``make_lstm_actor_critic``
written with the composable parts of ``networks-api.md``, and the MLP stacks they are made of
(``make_mlp``, ``make_mlp_layers``).

``compose_mlp_actor_critic`` builds ``Sequential([Normalizer, Flattener, PPOAdapter(action=
Sequential([MLP, NormalTanhSampler]), value=MLP)])``. Built from the same ``nnx.Rngs`` seed
with the same arguments, its parameters, its action draws and therefore its losses equal
those of ``make_mlp_actor_critic``'s ``PPONetwork`` (the same initializers are drawn in the
same order; ``bench/network_parts.py`` checks it and compares their speed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from flax import nnx

from nnx_ppo.networks.adapter import PPOAdapter
from nnx_ppo.networks.base import StatefulModule
from nnx_ppo.networks.containers import Sequential, Splitter
from nnx_ppo.networks.feedforward import Activation, Dense
from nnx_ppo.networks.layers import scaled_lecun_uniform
from nnx_ppo.networks.normalizer import Normalizer, flat_size, obs_shapes
from nnx_ppo.networks.precision import DEFAULT_PRECISION, check_precision, linear_kwargs
from nnx_ppo.networks.recurrent import LSTM, forget_bias_init
from nnx_ppo.networks.sampling_layers import NormalTanhSampler
from nnx_ppo.networks.utils import Filter, Flattener


def make_mlp_layers(
    sizes: Sequence[int],
    rngs: nnx.Rngs,
    activation: Activation = "relu",
    activation_last_layer: bool = True,
    *,
    initializer_scale: float = 1.0,
    last_layer_scale: float = 1.0,
    precision: str = DEFAULT_PRECISION,
) -> list[StatefulModule]:
    """The ``Dense`` layers of an MLP with feature sizes ``(in, hidden..., out)``.

    Args:
        sizes: At least two positive feature sizes.
        rngs: Streams for initialization.
        activation: Every layer's activation (name, callable or None).
        activation_last_layer: Whether the last layer has it too.
        initializer_scale: Multiplies every layer's initial (Lecun-uniform) weights.
        last_layer_scale: Multiplies the last layer's initial weights once more (small
            values make a policy start near its mean action).
        precision: The arithmetic of the products (``nnx_ppo.networks.precision``).

    Raises:
        ValueError: If ``sizes`` has fewer than two entries or one is not positive.
    """
    sizes = list(sizes)
    if len(sizes) < 2 or any(isinstance(s, bool) or not isinstance(s, int) for s in sizes):
        raise ValueError(f"MLP sizes must be >= 2 positive integers, got {sizes}")
    kwargs = linear_kwargs(check_precision(precision))
    n_layers = len(sizes) - 1
    layers: list[StatefulModule] = []
    for i in range(n_layers):
        last = i == n_layers - 1
        scale = initializer_scale * (last_layer_scale if last else 1.0)
        layers.append(
            Dense(
                sizes[i],
                sizes[i + 1],
                rngs,
                activation=None if last and not activation_last_layer else activation,
                kernel_init=scaled_lecun_uniform(scale),
                **kwargs,
            )
        )
    return layers


def make_mlp(
    sizes: Sequence[int],
    rngs: nnx.Rngs,
    activation: Activation = "relu",
    activation_last_layer: bool = True,
    **kwargs: Any,
) -> Sequential:
    """``Sequential(make_mlp_layers(...))``: an MLP as one carry-less module."""
    return Sequential(make_mlp_layers(sizes, rngs, activation, activation_last_layer, **kwargs))


def compose_mlp_actor_critic(
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
    obs_keys: tuple[str, str] | None = None,
    precision: str = DEFAULT_PRECISION,
) -> Sequential:
    """``make_mlp_actor_critic``'s network as a composition of the toolkit's parts.

    ``[Normalizer ->] Flattener -> PPOAdapter(action=Sequential([MLP, NormalTanhSampler]),
    value=MLP)``; the policy's last layer starts at 0.01 of its Lecun scale. The defaults
    are ``make_mlp_actor_critic``'s, which checks the arguments and calls this.

    With ``reward_streams`` the value MLP has one output per stream and ends with a
    ``Splitter`` into ``{stream: [B, 1]}`` (``value_estimates`` ``{stream: [B]}``). With
    ``obs_keys = (policy key, value key)`` (a dict observation) the whole observation is
    normalized (each feature by its own statistics) and each port starts with a ``Filter``
    of its key and a ``Flattener``: ``[Normalizer ->] PPOAdapter(action=Sequential([Filter,
    Flattener, MLP, NormalTanhSampler]), value=Sequential([Filter, Flattener, MLP]))``.

    Raises:
        ValueError: For a missing ``rngs`` or sizes that are not positive.
    """
    if rngs is None:
        raise ValueError("compose_mlp_actor_critic needs rngs (an nnx.Rngs)")
    shapes = obs_shapes(obs_size)
    if obs_keys is None:
        n_actor_in = n_critic_in = flat_size(obs_size)
        actor_in: list[StatefulModule] = []
        critic_in: list[StatefulModule] = []
    else:
        n_actor_in, n_critic_in = (math.prod(shapes[key]) for key in obs_keys)
        actor_in = [Filter({obs_keys[0]: obs_keys[0]}), Flattener()]
        critic_in = [Filter({obs_keys[1]: obs_keys[1]}), Flattener()]
    actor = make_mlp_layers(
        (n_actor_in, *actor_hidden_sizes, 2 * action_size),
        rngs,
        activation,
        activation_last_layer=False,
        initializer_scale=initializer_scale,
        last_layer_scale=0.01,
        precision=precision,
    )
    critic = make_mlp_layers(
        (n_critic_in, *critic_hidden_sizes, len(reward_streams or (0,))),
        rngs,
        activation,
        activation_last_layer=False,
        initializer_scale=initializer_scale,
        precision=precision,
    )
    heads = [] if reward_streams is None else [Splitter(**dict.fromkeys(reward_streams, 1))]
    sampler = NormalTanhSampler(rngs, entropy_weight, min_std=min_std, std_scale=std_scale)
    features: list[StatefulModule] = [Normalizer(obs_size)] if normalize_obs else []
    if obs_keys is None:
        features.append(Flattener())
    adapter = PPOAdapter(
        action=Sequential([*actor_in, *actor, sampler]),
        value=Sequential([*critic_in, *critic, *heads]),
    )
    return Sequential([*features, adapter])


def compose_lstm_actor_critic(
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
) -> Sequential:
    """``make_lstm_actor_critic``'s network as a composition of the toolkit's parts.

    ``[Normalizer ->] Flattener -> PPOAdapter(action=Sequential([LSTM, MLP,
    NormalTanhSampler]), value=Sequential([LSTM, MLP [-> Splitter]]))``: each port has an
    LSTM of its own (``concat_inputs``: one Lecun-normal kernel over ``[x, h]``, forget bias
    1), then Dense layers with the activation between them; the policy's last layer starts at
    0.01 of its Lecun scale. The parameters are drawn in the order of the ``PPONetwork`` this
    factory built before (policy LSTM, policy MLP, value LSTM, value MLP, sampler), so the
    same seed gives the same network. ``make_lstm_actor_critic`` checks the arguments and
    calls this.
    """
    n_in = flat_size(obs_size)

    def port(out_size: int, hidden: Sequence[int], last_layer_scale: float) -> list[Any]:
        lstm = LSTM(
            n_in,
            lstm_size,
            rngs,
            bias_init=forget_bias_init(1.0),
            concat_inputs=True,
            precision=precision,
        )
        dense = make_mlp_layers(
            (lstm_size, *hidden, out_size),
            rngs,
            activation,
            activation_last_layer=False,
            last_layer_scale=last_layer_scale,
            precision=precision,
        )
        return [lstm, *dense]

    actor = port(2 * action_size, actor_hidden_sizes, 0.01)
    critic = port(len(reward_streams or (0,)), critic_hidden_sizes, 1.0)
    heads = [] if reward_streams is None else [Splitter(**dict.fromkeys(reward_streams, 1))]
    sampler = NormalTanhSampler(rngs, entropy_weight, min_std=min_std)
    features: list[StatefulModule] = [Normalizer(obs_size)] if normalize_obs else []
    adapter = PPOAdapter(action=Sequential([*actor, sampler]), value=Sequential([*critic, *heads]))
    return Sequential([*features, Flattener(), adapter])
