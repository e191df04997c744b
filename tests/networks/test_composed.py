"""The MLP actor-critic the factory builds from the toolkit's parts (``composed``) against the
``PPONetwork`` it built before (``legacy.ppo_network_mlp_actor_critic``): equal parameters,
outputs and training for the same seed, for every option; ``make_mlp``,
``make_mlp_layers``; the factory's positional order of ``networks-api.md``; acting without a
carry-less value port."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import config as C
from nnx_ppo.algorithms.ppo import train_ppo
from nnx_ppo.networks import factories, legacy
from nnx_ppo.networks.adapter import PPOAdapter
from nnx_ppo.networks.containers import Sequential
from nnx_ppo.networks.feedforward import Dense
from nnx_ppo.networks.recurrent import LSTM
from nnx_ppo.networks.sampling_layers import NormalTanhSampler

OBS, ACTIONS, BATCH = 5, 2, 7
SIZES = {"actor_hidden_sizes": (16, 16), "critic_hidden_sizes": (32,)}


def obs(batch: int = BATCH) -> jax.Array:
    return jax.random.normal(jax.random.key(1), (batch, OBS))


def params(network: nnx.Module) -> list[np.ndarray]:
    """The network's parameters, as a sorted list (the two layouts name them differently)."""
    leaves = [np.asarray(p) for p in jax.tree.leaves(nnx.state(network, nnx.Param))]
    return sorted(leaves, key=lambda a: (a.shape, a.ravel().tolist()))


DICT_OBS = {"state": (3,), "privileged_state": (2, 2)}
KEYS = {"policy_obs_key": "state", "value_obs_key": "privileged_state"}


def observation(obs_size, batch: int = BATCH):
    if not isinstance(obs_size, dict):
        return obs(batch)
    keys = jax.random.split(jax.random.key(1), len(obs_size))
    return {
        k: jax.random.normal(key, (batch, *s)) * 2 + 1
        for key, (k, s) in zip(keys, obs_size.items(), strict=True)
    }


@pytest.mark.parametrize(
    ("obs_size", "options"),
    [
        (OBS, {}),
        (OBS, {"initializer_scale": 0.5, "std_scale": 2.0}),
        (OBS, {"normalize_obs": False, "activation": "tanh", "min_std": 0.1}),
        (OBS, {"reward_streams": ("task", "energy")}),
        (OBS, {"precision": "bfloat16"}),
        (DICT_OBS, {}),
        (DICT_OBS, KEYS),
        (DICT_OBS, {**KEYS, "normalize_obs": False}),
    ],
)
def test_the_factory_network_equals_the_old_ppo_network_for_the_same_seed(
    obs_size, options
) -> None:
    fixed = legacy.ppo_network_mlp_actor_critic(
        obs_size, ACTIONS, rngs=nnx.Rngs(3), **SIZES, **options
    )
    parts = factories.make_mlp_actor_critic(obs_size, ACTIONS, rngs=nnx.Rngs(3), **SIZES, **options)
    assert isinstance(parts, Sequential)
    assert factories.recipe_of(parts) == factories.recipe_of(fixed)
    for a, b in zip(params(fixed), params(parts), strict=True):
        np.testing.assert_array_equal(a, b)
    x = observation(obs_size)
    if options.get("normalize_obs", True):  # statistics that are not the identity
        fixed.update_statistics(x)
        parts.update_statistics(x)
    out_f = fixed(fixed.initialize_state(BATCH), x).output
    out_p = parts(parts.initialize_state(BATCH), x).output
    for field in ("actions", "raw_actions", "loglikelihoods", "value_estimates"):
        jax.tree.map(np.testing.assert_array_equal, getattr(out_f, field), getattr(out_p, field))
    np.testing.assert_array_equal(out_f.regularization_loss, out_p.regularization_loss)


def test_both_train_identically_on_a_built_in_env() -> None:
    env = envs.load("PointReach", {})
    config = C.TrainConfig(
        ppo=C.PPOConfig(n_envs=16, rollout_length=8, total_steps=16 * 8 * 4, n_minibatches=2),
        eval=C.EvalConfig(enabled=False),
        seed=0,
    )

    def losses(network: nnx.Module) -> list[dict[str, float]]:
        logged: list[dict[str, float]] = []
        log = lambda m, _step: logged.append({k: float(v) for k, v in m.items() if "loss" in k})  # noqa: E731
        train_ppo(env, network, config, log_fn=log)
        return logged

    args = (env.observation_size, env.action_size)
    fixed = losses(legacy.ppo_network_mlp_actor_critic(*args, rngs=nnx.Rngs(0), **SIZES))
    parts = losses(factories.make_mlp_actor_critic(*args, rngs=nnx.Rngs(0), **SIZES))
    assert len(fixed) == 4 and fixed[0]
    assert parts == fixed


def test_the_factory_takes_the_positional_order_of_the_interface() -> None:
    by_position = factories.make_mlp_actor_critic(
        OBS, ACTIONS, (16,), (32,), nnx.Rngs(0), "relu", False, 0.5, 0.0, 0.1, 2.0
    )
    by_name = factories.make_mlp_actor_critic(
        OBS,
        ACTIONS,
        rngs=nnx.Rngs(0),
        actor_hidden_sizes=(16,),
        critic_hidden_sizes=(32,),
        activation="relu",
        normalize_obs=False,
        initializer_scale=0.5,
        entropy_weight=0.0,
        min_std=0.1,
        std_scale=2.0,
    )
    assert factories.recipe_of(by_position) == factories.recipe_of(by_name)
    assert factories.recipe_of(by_name)["fields"]["std_scale"] == 2.0
    for a, b in zip(params(by_position), params(by_name), strict=True):
        np.testing.assert_array_equal(a, b)
    _, scale = by_name.layers[-1].action.layers[-1].distribution(jnp.zeros((1, 2 * ACTIONS)))
    np.testing.assert_allclose(scale, 2.0 * jnp.log(2.0) + 0.1, rtol=1e-6)


def test_unscaled_networks_keep_their_recipe() -> None:
    network = factories.make_mlp_actor_critic(OBS, ACTIONS, rngs=nnx.Rngs(0))
    assert not {"initializer_scale", "std_scale"} & set(factories.recipe_of(network)["fields"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "rngs must be an nnx.Rngs"),
        ({"rngs": nnx.Rngs(0), "std_scale": 0.0}, "std_scale must be a positive number"),
        ({"rngs": nnx.Rngs(0), "initializer_scale": -1}, "initializer_scale must be a positive"),
    ],
)
def test_the_factory_refuses_bad_arguments_by_name(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        factories.make_mlp_actor_critic(OBS, ACTIONS, **kwargs)


def test_make_mlp_stacks_dense_layers_with_the_last_activation_optional() -> None:
    layers = factories.make_mlp_layers([OBS, 8, 3], nnx.Rngs(0))
    assert [type(layer) for layer in layers] == [Dense, Dense]
    assert [(d.in_features, d.out_features) for d in layers] == [(OBS, 8), (8, 3)]
    x = obs()
    relu = factories.make_mlp([OBS, 8, 3], nnx.Rngs(0))
    relu_out = relu(relu.initialize_state(BATCH), x).output
    affine = factories.make_mlp([OBS, 8, 3], nnx.Rngs(0), activation_last_layer=False)
    affine_out = affine(affine.initialize_state(BATCH), x).output
    np.testing.assert_allclose(relu_out, jnp.maximum(affine_out, 0.0), rtol=1e-6)
    assert float(jnp.min(affine_out)) < 0.0
    with pytest.raises(ValueError, match="MLP sizes"):
        factories.make_mlp([OBS], nnx.Rngs(0))


def adapter(value: nnx.Module) -> PPOAdapter:
    rngs = nnx.Rngs(0)
    action = Sequential([Dense(OBS, 2 * ACTIONS, rngs), NormalTanhSampler(rngs, 0.01)])
    return PPOAdapter(action=action, value=value)


def test_acting_skips_a_carry_less_value_port() -> None:
    net = adapter(
        Sequential([Dense(OBS, 4, nnx.Rngs(1), activation="relu"), Dense(4, 1, nnx.Rngs(2))])
    )
    state = net.initialize_state(BATCH)
    full = nnx.clone(net)(state, obs()).output
    acted = net.act(state, obs()).output
    np.testing.assert_array_equal(acted.actions, full.actions)
    np.testing.assert_array_equal(acted.loglikelihoods, full.loglikelihoods)
    assert acted.value_estimates.shape == (BATCH,)
    assert not jnp.any(acted.value_estimates) and jnp.any(full.value_estimates)


def test_acting_runs_a_value_port_that_keeps_a_carry() -> None:
    net = adapter(Sequential([LSTM(OBS, 4, nnx.Rngs(1)), Dense(4, 1, nnx.Rngs(2))]))
    state = net.initialize_state(BATCH)
    full = nnx.clone(net)(state, obs())
    acted = net.act(state, obs())
    np.testing.assert_array_equal(acted.output.value_estimates, full.output.value_estimates)
    for a, b in zip(
        jax.tree.leaves(acted.next_state), jax.tree.leaves(full.next_state), strict=True
    ):
        np.testing.assert_array_equal(a, b)
