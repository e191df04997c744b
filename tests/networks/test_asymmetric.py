"""The asymmetric actor-critic: the policy reads one observation key, the value another."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo.networks.actor_critic import key_slice
from nnx_ppo.networks.containers import Sequential
from nnx_ppo.networks.factories import make_mlp_actor_critic

SIZES = {"state": (3,), "privileged_state": (5,)}
TINY = {"actor_hidden_sizes": (8,), "critic_hidden_sizes": (8,)}


def obs(seed: int, batch: int = 4) -> dict[str, jnp.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: jnp.asarray(rng.standard_normal((batch, *v)), jnp.float32) for k, v in SIZES.items()}


def make(**kw) -> Sequential:
    fields = {"policy_obs_key": "state", "value_obs_key": "privileged_state", **TINY, **kw}
    return make_mlp_actor_critic(SIZES, 2, rngs=nnx.Rngs(0), **fields)


def test_key_slices_follow_sorted_key_order():
    # flatten_obs concatenates sorted keys: privileged_state (5 features), then state (3).
    assert key_slice(SIZES, "privileged_state", "value_obs_key") == (0, 5)
    assert key_slice(SIZES, "state", "policy_obs_key") == (5, 8)
    with pytest.raises(ValueError, match=r"policy_obs_key 'nope'.*privileged_state"):
        key_slice(SIZES, "nope", "policy_obs_key")


@pytest.mark.parametrize("normalize_obs", [True, False])
def test_policy_never_sees_the_privileged_state(normalize_obs):
    net = make(normalize_obs=normalize_obs)
    adapter = net.layers[-1]
    # Each port starts with a Filter of its key and a Flattener: the actor reads 3
    # features, the critic 5.
    assert adapter.action.layers[0].extractions == {"state": "state"}
    assert adapter.value.layers[0].extractions == {"privileged_state": "privileged_state"}
    assert adapter.action.layers[2].linear.kernel.shape[0] == 3
    assert adapter.value.layers[2].linear.kernel.shape[0] == 5
    if normalize_obs:  # statistics that are not the identity, so normalization matters
        net.update_statistics(obs(1, batch=64))
    net.eval()
    a, b = obs(0), obs(0)
    b["privileged_state"] = b["privileged_state"] * 7.0 + 3.0
    out_a = net(net.initialize_state(4), a).output
    out_b = net(net.initialize_state(4), b).output
    np.testing.assert_array_equal(out_a.actions, out_b.actions)
    np.testing.assert_array_equal(
        out_a.distribution_params["loc"], out_b.distribution_params["loc"]
    )
    assert not np.allclose(out_a.value_estimates, out_b.value_estimates)
    # And the value does not read the state: changing it alone changes the actions only.
    c = obs(0)
    c["state"] = c["state"] + 1.0
    out_c = net(net.initialize_state(4), c).output
    np.testing.assert_array_equal(out_a.value_estimates, out_c.value_estimates)
    assert not np.allclose(out_a.actions, out_c.actions)
    acted = net.act(net.initialize_state(4), b).output
    np.testing.assert_array_equal(acted.actions, out_a.actions)


def test_obs_keys_are_ignored_for_array_observations_as_in_brax():
    net = make_mlp_actor_critic(
        6, 2, rngs=nnx.Rngs(0), policy_obs_key="state", value_obs_key="state", **TINY
    )
    action_port = net.layers[-1].action
    assert action_port.layers[0].linear.kernel.shape[0] == 6  # no Filter: the whole array


def test_bad_obs_keys_name_the_field():
    with pytest.raises(ValueError, match="value_obs_key 'nope'"):
        make(value_obs_key="nope")
    with pytest.raises(ValueError, match="given together"):
        make(value_obs_key=None)
