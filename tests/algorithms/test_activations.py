"""Recordable networks (``with_recording``) and ``record_activations_rollout``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo.algorithms.activations import record_activations_rollout
from nnx_ppo.envs import load
from nnx_ppo.networks.factories import make_lstm_actor_critic, make_mlp_actor_critic
from nnx_ppo.networks.layers import MLP
from nnx_ppo.networks.recording import ACTIVATIONS_PREFIX, activations_from_metrics, with_recording

N_ENVS, N_STEPS = 3, 7


def mlp_net(obs_size: int, action_size: int):
    return make_mlp_actor_critic(
        obs_size,
        action_size,
        rngs=nnx.Rngs(0),
        actor_hidden_sizes=(8,),
        critic_hidden_sizes=(8,),
        normalize_obs=False,
    )


def lstm_net(obs_size: int, action_size: int):
    return make_lstm_actor_critic(
        obs_size,
        action_size,
        rngs=nnx.Rngs(0),
        lstm_size=8,
        actor_hidden_sizes=(8,),
        critic_hidden_sizes=(8,),
    )


def reset_obs(env, key: jax.Array, n_envs: int) -> jax.Array:
    """The observations ``record_activations_rollout`` starts from for ``key``."""
    key_reset, _ = jax.random.split(key)
    return jax.vmap(env.reset)(jax.random.split(key_reset, n_envs)).obs


def test_mlp_activation_keys_and_shapes():
    env = load("PointReach")  # obs 6, action 2
    acts, dones = record_activations_rollout(env, mlp_net(6, 2), N_ENVS, N_STEPS, jax.random.key(0))
    shapes = {k: v.shape for k, v in acts.items()}
    # Sequential([Flattener, PPOAdapter]): each port's Dense layers at their module paths.
    assert shapes == {
        "layers/1/action/layers/0": (N_STEPS, N_ENVS, 8),
        "layers/1/action/layers/1": (N_STEPS, N_ENVS, 4),  # loc and pre-scale of 2 actions
        "layers/1/value/layers/0": (N_STEPS, N_ENVS, 8),
        "layers/1/value/layers/1": (N_STEPS, N_ENVS, 1),
    }
    assert dones.shape == (N_STEPS, N_ENVS) and dones.dtype == jnp.bool_


def test_lstm_activation_keys_and_shapes():
    env = load("MemoryCue")  # obs 2, action 1
    acts, _ = record_activations_rollout(env, lstm_net(2, 1), N_ENVS, N_STEPS, jax.random.key(0))
    shapes = {k: v.shape for k, v in acts.items()}
    # Sequential([Normalizer, Flattener, PPOAdapter]): each port's LSTM's hidden state,
    # then its Dense layers, at their module paths.
    assert shapes == {
        "layers/2/action/layers/0": (N_STEPS, N_ENVS, 8),
        "layers/2/action/layers/1": (N_STEPS, N_ENVS, 8),
        "layers/2/action/layers/2": (N_STEPS, N_ENVS, 2),
        "layers/2/value/layers/0": (N_STEPS, N_ENVS, 8),
        "layers/2/value/layers/1": (N_STEPS, N_ENVS, 8),
        "layers/2/value/layers/2": (N_STEPS, N_ENVS, 1),
    }


def test_mlp_activations_match_hand_computation_at_first_step():
    env = load("PointReach")
    net = mlp_net(6, 2)
    key = jax.random.key(1)
    acts, _ = record_activations_rollout(env, net, N_ENVS, N_STEPS, key)
    obs = reset_obs(env, key, N_ENVS)  # no normalizer: the features are the observations
    for side in ("action", "value"):
        port = getattr(net.layers[-1], side)
        first, last = port.layers[0].linear, port.layers[1].linear
        hidden = nnx.swish(obs @ first.kernel[...] + first.bias[...])
        out = hidden @ last.kernel[...] + last.bias[...]  # the last layer has no activation
        at = f"layers/1/{side}/layers"
        np.testing.assert_allclose(acts[f"{at}/0"][0], hidden, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(acts[f"{at}/1"][0], out, rtol=1e-5, atol=1e-6)


def test_lstm_hidden_state_matches_hand_computation_at_first_step():
    env = load("MemoryCue")
    net = lstm_net(2, 1)
    key = jax.random.key(2)
    acts, _ = record_activations_rollout(env, net, N_ENVS, N_STEPS, key)
    x = reset_obs(env, key, N_ENVS)
    for layer in net.layers[:-1]:  # the Normalizer and the Flattener
        x = layer(layer.initialize_state(N_ENVS), x).output
    gates = net.layers[-1].action.layers[0].cell.gates
    # h0 = c0 = 0: c = sigmoid(i) * tanh(g), h = sigmoid(o) * tanh(c).
    z = jnp.concatenate([x, jnp.zeros((N_ENVS, 8))], axis=-1) @ gates.kernel[...] + gates.bias[...]
    i, _, g, o = jnp.split(z, 4, axis=-1)
    h = jax.nn.sigmoid(o) * jnp.tanh(jax.nn.sigmoid(i) * jnp.tanh(g))
    np.testing.assert_allclose(acts["layers/2/action/layers/0"][0], h, rtol=1e-5, atol=1e-6)


def test_rollout_matches_a_plain_loop_over_the_original_network():
    """The scan carries the recurrent state and never resets it; dones are pre-step."""
    env = load("MemoryCue", {"delay": 1})  # done at the 3rd step, then stays done
    net = lstm_net(2, 1)
    key = jax.random.key(3)
    acts, dones = record_activations_rollout(env, net, N_ENVS, N_STEPS, key)
    reference = nnx.clone(net)
    reference.eval()
    key_reset, _ = jax.random.split(key)
    env_state = jax.vmap(env.reset)(jax.random.split(key_reset, N_ENVS))
    state = reference.initialize_state(N_ENVS)
    done = np.zeros(N_ENVS, bool)
    for t in range(N_STEPS):
        np.testing.assert_array_equal(dones[t], done)
        out = reference(state, env_state.obs)
        state = out.next_state
        # Each port's LSTM carry is (c, h).
        h_actor, h_critic = state[-1]["action"][0][1], state[-1]["value"][0][1]
        np.testing.assert_allclose(
            acts["layers/2/action/layers/0"][t], h_actor, rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(
            acts["layers/2/value/layers/0"][t], h_critic, rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(
            acts["layers/2/action/layers/2"][t][:, :1],
            out.output.distribution_params["loc"],
            rtol=1e-5,
            atol=1e-6,
        )
        env_state = jax.vmap(env.step)(env_state, out.output.actions)
        done = done | (np.asarray(env_state.done) > 0.5)
    # Steps 0, 1, 2 are taken in a live episode; step 2 ends it, so from t = 3 on the
    # pre-step mask is set in every env.
    expected = np.array([[False] * N_ENVS] * 3 + [[True] * N_ENVS] * (N_STEPS - 3))
    np.testing.assert_array_equal(dones, expected)


def test_original_network_is_untouched():
    net = lstm_net(2, 1)
    net.eval()  # deterministic actions, so that two calls can be compared
    graphdef = nnx.graphdef(net)
    state = net.initialize_state(N_ENVS)
    obs = jnp.linspace(-1.0, 1.0, 2 * N_ENVS).reshape(N_ENVS, 2)
    before = net(state, obs)
    recorder = with_recording(net)
    record_activations_rollout(load("MemoryCue"), net, N_ENVS, N_STEPS, jax.random.key(4))
    after = net(state, obs)
    assert nnx.graphdef(net) == graphdef
    assert not any(k.startswith(ACTIVATIONS_PREFIX) for k in after.metrics)
    for field in ("actions", "value_estimates", "distribution_params"):
        jax.tree.map(
            np.testing.assert_array_equal,
            getattr(before.output, field),
            getattr(after.output, field),
        )
    # The recordable copy computes the same outputs and adds the activations.
    recorded = recorder(state, obs)
    for field in ("actions", "value_estimates", "distribution_params"):
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7),
            getattr(before.output, field),
            getattr(recorded.output, field),
        )
    assert set(activations_from_metrics(recorded.metrics)) == {
        "layers/2/action/layers/0",
        "layers/2/action/layers/1",
        "layers/2/action/layers/2",
        "layers/2/value/layers/0",
        "layers/2/value/layers/1",
        "layers/2/value/layers/2",
    }


def test_train_mode_is_left_alone_and_recording_twice_records_once():
    net = mlp_net(6, 2)
    recorder = with_recording(net)
    assert not net.layers[-1].action.layers[-1].deterministic
    record_activations_rollout(load("PointReach"), net, N_ENVS, 2, jax.random.key(5))
    assert not net.layers[-1].action.layers[-1].deterministic
    twice = with_recording(recorder)
    assert nnx.graphdef(twice) == nnx.graphdef(recorder)


def test_bare_mlp_is_recorded_at_the_root():
    mlp = MLP((3, 5, 2), rngs=nnx.Rngs(0))
    out = with_recording(mlp)((), jnp.ones((4, 3)))
    shapes = {k: v.shape for k, v in activations_from_metrics(out.metrics).items()}
    assert shapes == {"layers/0": (4, 5), "layers/1": (4, 2)}
    np.testing.assert_allclose(out.output, mlp((), jnp.ones((4, 3))).output, rtol=1e-6)


@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_invalid_sizes_raise(bad):
    env, net = load("PointReach"), mlp_net(6, 2)
    with pytest.raises(ValueError, match="n_envs"):
        record_activations_rollout(env, net, bad, N_STEPS, jax.random.key(0))
    with pytest.raises(ValueError, match="max_episode_length"):
        record_activations_rollout(env, net, N_ENVS, bad, jax.random.key(0))
