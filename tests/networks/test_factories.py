"""Actor-critic factories: observation kinds, output shapes, size checks, eval mode."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo.networks import factories
from nnx_ppo.networks.factories import make_lstm_actor_critic, make_mlp_actor_critic
from nnx_ppo.networks.types import PPONetworkOutput

BATCH, ACTIONS = 4, 2
TINY = {"actor_hidden_sizes": (8,), "critic_hidden_sizes": (8,)}
FACTORIES = {
    "mlp": lambda obs_size, **kw: make_mlp_actor_critic(
        obs_size, ACTIONS, rngs=nnx.Rngs(0), **{**TINY, **kw}
    ),
    "lstm": lambda obs_size, **kw: make_lstm_actor_critic(
        obs_size, ACTIONS, rngs=nnx.Rngs(0), lstm_size=8, **{**TINY, **kw}
    ),
}
DICT_SIZE = {"state": (4,), "target": (2,)}


def observations(obs_size, seed: int = 0):
    """A ``[BATCH, ...]`` observation (an array or a dict of arrays) for ``obs_size``."""
    rng = np.random.default_rng(seed)
    if isinstance(obs_size, dict):
        return {
            k: jnp.asarray(rng.standard_normal((BATCH, *v)), jnp.float32)
            for k, v in obs_size.items()
        }
    shape = (obs_size,) if isinstance(obs_size, int) else obs_size
    return jnp.asarray(rng.standard_normal((BATCH, *shape)), jnp.float32)


def check_output(out: PPONetworkOutput) -> None:
    assert isinstance(out, PPONetworkOutput)
    assert out.actions.shape == (BATCH, ACTIONS)
    assert out.raw_actions.shape == (BATCH, ACTIONS)
    assert out.loglikelihoods.shape == (BATCH,)
    assert out.value_estimates.shape == (BATCH,)
    assert out.distribution_params["loc"].shape == (BATCH, ACTIONS)
    assert out.distribution_params["scale"].shape == (BATCH, ACTIONS)
    assert out.regularization_loss.shape == ()
    assert np.all(np.abs(np.asarray(out.actions)) <= 1.0)
    for leaf in jax.tree.leaves(out):
        assert np.all(np.isfinite(np.asarray(leaf)))


@pytest.mark.parametrize("kind", FACTORIES)
@pytest.mark.parametrize("normalize_obs", [True, False])
@pytest.mark.parametrize("obs_size", [6, (2, 3), DICT_SIZE], ids=["int", "shape", "dict"])
def test_output_shapes_for_every_observation_kind(kind, normalize_obs, obs_size):
    net = FACTORIES[kind](obs_size, normalize_obs=normalize_obs)
    state = net.initialize_state(BATCH)
    result = net(state, observations(obs_size))
    check_output(result.output)
    assert jax.tree.structure(result.next_state) == jax.tree.structure(state)
    # The network also accepts [T, B, ...] observations after a statistics update.
    net.update_statistics(jax.tree.map(lambda x: x[None], observations(obs_size, seed=1)))


def test_dict_observation_is_the_concatenation_of_its_keys_in_sorted_order():
    # Without a normalizer the features are the flattened leaves; with the same weights,
    # a dict network must see {"state", "target"} exactly as a flat [state, target] vector.
    flat_net = FACTORIES["mlp"](6, normalize_obs=False)
    dict_net = FACTORIES["mlp"](DICT_SIZE, normalize_obs=False)
    obs = observations(DICT_SIZE)
    flat_obs = jnp.concatenate([obs["state"], obs["target"]], axis=-1)
    flat_net.eval()
    dict_net.eval()
    a = flat_net(flat_net.initialize_state(BATCH), flat_obs).output
    b = dict_net(dict_net.initialize_state(BATCH), obs).output
    np.testing.assert_allclose(a.actions, b.actions, rtol=1e-6)
    np.testing.assert_allclose(a.value_estimates, b.value_estimates, rtol=1e-6)


def test_lstm_network_state_shapes_and_memory():
    net = FACTORIES["lstm"](6)
    net.eval()
    state = net.initialize_state(BATCH)
    for port in ("action", "value"):  # [Normalizer, Flattener, PPOAdapter]; LSTM first
        lstm_state = state[-1][port][0]
        assert [s.shape for s in lstm_state] == [(BATCH, 8)] * 2
    obs_a, obs_b = observations(6, seed=0), observations(6, seed=1)
    last = observations(6, seed=2)
    after_a = net(net(state, obs_a).next_state, last).output
    after_b = net(net(state, obs_b).next_state, last).output
    # Same last observation, different history: the recurrent network answers differently.
    assert not np.allclose(after_a.value_estimates, after_b.value_estimates)
    assert not np.allclose(after_a.actions, after_b.actions)
    reset = net.reset_state(net(state, obs_a).next_state)
    assert all(np.all(np.asarray(x) == 0) for x in jax.tree.leaves(reset))


@pytest.mark.parametrize("kind", FACTORIES)
def test_eval_mode_makes_actions_deterministic(kind):
    net = FACTORIES[kind](DICT_SIZE)
    obs = observations(DICT_SIZE)
    state = net.initialize_state(BATCH)
    net.train()
    first, second = net(state, obs).output, net(state, obs).output
    assert not np.allclose(first.actions, second.actions)
    net.eval()
    first, second = net(state, obs).output, net(state, obs).output
    np.testing.assert_array_equal(first.actions, second.actions)
    np.testing.assert_allclose(first.actions, np.tanh(first.distribution_params["loc"]), rtol=1e-6)


@pytest.mark.parametrize("kind", FACTORIES)
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"action_size": 0}, "action_size"),
        ({"action_size": -2}, "action_size"),
        ({"action_size": 1.5}, "action_size"),
        ({"actor_hidden_sizes": (8, 0)}, "actor_hidden_sizes"),
        ({"actor_hidden_sizes": (-8,)}, "actor_hidden_sizes"),
        ({"actor_hidden_sizes": ("wide",)}, "actor_hidden_sizes"),
        ({"critic_hidden_sizes": (0,)}, "critic_hidden_sizes"),
        ({"critic_hidden_sizes": 8}, "critic_hidden_sizes"),
    ],
)
def test_bad_sizes_raise_value_error_naming_the_field(kind, kwargs, field):
    factory = make_mlp_actor_critic if kind == "mlp" else make_lstm_actor_critic
    args = {"obs_size": 6, "action_size": ACTIONS, **kwargs}
    with pytest.raises(ValueError, match=field):
        factory(args.pop("obs_size"), args.pop("action_size"), rngs=nnx.Rngs(0), **args)


@pytest.mark.parametrize("lstm_size", [0, -3, 2.5])
def test_bad_lstm_size_raises_value_error_naming_the_field(lstm_size):
    with pytest.raises(ValueError, match="lstm_size"):
        make_lstm_actor_critic(6, ACTIONS, rngs=nnx.Rngs(0), lstm_size=lstm_size)


@pytest.mark.parametrize("kind", FACTORIES)
@pytest.mark.parametrize("obs_size", [0, -1, {"state": (0,)}], ids=["zero", "negative", "dict"])
def test_bad_obs_size_raises_value_error_naming_the_field(kind, obs_size):
    with pytest.raises(ValueError, match="obs_size"):
        FACTORIES[kind](obs_size)


def test_bool_action_size_is_rejected():
    with pytest.raises(ValueError, match="action_size"):
        make_mlp_actor_critic(6, True, rngs=nnx.Rngs(0), **TINY)


def _layout(network) -> dict[str, tuple[int, ...]]:
    flat = nnx.to_flat_state(nnx.state(network, nnx.Param))
    return {"/".join(map(str, path)): tuple(v.get_value().shape) for path, v in flat}


@pytest.mark.parametrize(
    ("kind", "obs_size", "extra"),
    [
        ("mlp", (2, 3), {"reward_streams": ("a", "b"), "activation": "tanh"}),
        ("mlp", DICT_SIZE, {"policy_obs_key": "target", "value_obs_key": "state"}),
        ("lstm", DICT_SIZE, {"normalize_obs": False, "min_std": 0.1}),
    ],
)
def test_a_network_rebuilds_from_its_recipe(kind, obs_size, extra):
    network = FACTORIES[kind](obs_size, **extra)
    recipe = factories.recipe_of(network)
    assert (recipe["kind"], recipe["action_size"]) == (kind, ACTIONS)
    assert nnx.clone(network).recipe == network.recipe  # copies keep it
    rebuilt = factories.rebuild(recipe)
    assert type(rebuilt) is type(network)
    assert _layout(rebuilt) == _layout(network)
    assert factories.recipe_of(rebuilt) == recipe
    # Both are composed actor-critics: the same modules, sampler and activations.
    assert _structure(rebuilt) == _structure(network)
    sampler = rebuilt.layers[-1].action.layers[-1]
    assert (
        sampler.min_std
        == network.layers[-1].action.layers[-1].min_std
        == extra.get("min_std", 1e-3)
    )
    activations = [
        [getattr(layer, "activation", None) for layer in net.layers[-1].action.layers]
        for net in (rebuilt, network)
    ]
    assert activations[0] == activations[1] and activations[0][-2] is None


def _structure(network):
    """The module types along every path of ``network``."""
    return [
        (path, type(module).__name__)
        for path, module in nnx.iter_graph(network)
        if isinstance(module, nnx.Module)
    ]


def test_malformed_recipes_are_refused():
    recipe = factories.recipe_of(FACTORIES["mlp"](6))
    with pytest.raises(ValueError, match="malformed network recipe"):
        factories.rebuild({**recipe, "kind": "transformer"})
    with pytest.raises(ValueError, match="malformed network recipe"):
        factories.rebuild({k: v for k, v in recipe.items() if k != "fields"})
    with pytest.raises(ValueError, match=r"cannot be built.*lstm_size"):
        factories.rebuild({**recipe, "fields": {**recipe["fields"], "lstm_size": 8}})
    with pytest.raises(ValueError, match="actor_hidden_sizes"):
        factories.rebuild({**recipe, "fields": {**recipe["fields"], "actor_hidden_sizes": [0]}})
    assert factories.recipe_of(object()) is None
