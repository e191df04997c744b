"""Tests for the built-in pure-JAX environments."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nnx_ppo.envs import MemoryCue, PointReach, PointReachDict, State

BUILTIN_CLASSES = [PointReach, PointReachDict, MemoryCue]


def _zero_action(env) -> jax.Array:
    return jnp.zeros((env.action_size,), jnp.float32)


def _obs_shapes(env) -> object:
    size = env.observation_size
    return {k: tuple(v) for k, v in size.items()} if isinstance(size, dict) else (size,)


@pytest.mark.parametrize("env_class", BUILTIN_CLASSES)
def test_reset_and_step_shapes_and_dtypes_under_jit(env_class):
    env = env_class()
    state = jax.jit(env.reset)(jax.random.key(0))
    next_state = jax.jit(env.step)(state, _zero_action(env))
    for s in (state, next_state):
        assert isinstance(s, State)
        assert jax.tree.map(lambda x: x.shape, s.obs) == _obs_shapes(env)
        assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(s.obs))
        assert s.reward.shape == () and s.reward.dtype == jnp.float32
        assert s.done.shape == () and s.done.dtype == jnp.float32
        assert all(m.shape == () and m.dtype == jnp.float32 for m in s.metrics.values())
    assert jax.tree.structure(state) == jax.tree.structure(next_state)
    assert float(state.reward) == 0.0 and float(state.done) == 0.0


@pytest.mark.parametrize("env_class", BUILTIN_CLASSES)
def test_reset_and_step_under_vmap(env_class):
    env = env_class()
    n_envs = 5
    keys = jax.random.split(jax.random.key(1), n_envs)
    states = jax.jit(jax.vmap(env.reset))(keys)
    actions = jnp.zeros((n_envs, env.action_size), jnp.float32)
    states = jax.jit(jax.vmap(env.step))(states, actions)
    expected = jax.tree.map(lambda shape: (n_envs, *shape), _obs_shapes(env), is_leaf=_is_shape)
    assert jax.tree.map(lambda x: x.shape, states.obs) == expected
    assert states.reward.shape == (n_envs,) and states.done.shape == (n_envs,)


def _is_shape(x: object) -> bool:
    return isinstance(x, tuple) and all(isinstance(d, int) for d in x)


@pytest.mark.parametrize("env_class", BUILTIN_CLASSES)
def test_fixed_key_is_deterministic_and_keys_differ(env_class):
    env = env_class()
    action = jnp.full((env.action_size,), 0.3, jnp.float32)

    def run(key):
        state = env.reset(key)
        return env.step(env.step(state, action), action)

    run = jax.jit(run)
    first, second = run(jax.random.key(7)), run(jax.random.key(7))
    jax.tree.map(np.testing.assert_array_equal, first, second)
    # Different keys give different starts (MemoryCue: over many keys, both cues occur).
    keys = jax.random.split(jax.random.key(8), 32)
    obs = jax.tree.leaves(jax.vmap(env.reset)(keys).obs)[0]
    assert len(np.unique(np.asarray(obs), axis=0)) > 1


def test_point_reach_dynamics_and_reward():
    env = PointReach()
    state = env.reset(jax.random.key(0))
    pos, target = state.data.pos, state.data.target
    next_state = env.step(state, jnp.array([1.0, -1.0]))
    # vel = (1 - 0.2) * 0 + 0.1 * 4 * a = [0.4, -0.4]; pos moves by dt * vel = [0.04, -0.04].
    np.testing.assert_allclose(next_state.data.vel, [0.4, -0.4], rtol=1e-6)
    np.testing.assert_allclose(next_state.data.pos, pos + jnp.array([0.04, -0.04]), rtol=1e-6)
    distance = jnp.linalg.norm(next_state.data.pos - target)
    np.testing.assert_allclose(next_state.reward, jnp.exp(-distance / 0.25), rtol=1e-6)
    np.testing.assert_allclose(next_state.metrics["distance"], distance, rtol=1e-6)
    np.testing.assert_allclose(next_state.obs[4:], target)
    assert float(next_state.done) == 0.0


def test_point_reach_stays_in_arena_and_clips_actions():
    env = PointReach()
    state = env.reset(jax.random.key(3))
    step = jax.jit(env.step)
    for _ in range(30):
        state = step(state, jnp.array([5.0, 5.0]))  # clipped to [1, 1]
    np.testing.assert_array_equal(state.data.pos, [1.0, 1.0])
    np.testing.assert_array_equal(state.data.vel, [0.0, 0.0])


def _episode_return(env, policy, key, length=100, n_envs=64) -> float:
    def episode(key):
        key_reset, key_actions = jax.random.split(key)

        def body(state, key_action):
            state = env.step(state, policy(state.obs, key_action))
            return state, state.reward

        _, rewards = jax.lax.scan(body, env.reset(key_reset), jax.random.split(key_actions, length))
        return rewards.sum()

    return float(jax.jit(jax.vmap(episode))(jax.random.split(key, n_envs)).mean())


def test_point_reach_good_policy_clearly_beats_random():
    env = PointReach()

    def controller(obs, _key):
        return jnp.clip(10.0 * (obs[4:] - obs[:2]) - 2.0 * obs[2:4], -1.0, 1.0)

    def random_policy(_obs, key):
        return jax.random.uniform(key, (2,), minval=-1.0, maxval=1.0)

    good = _episode_return(env, controller, jax.random.key(0))
    random = _episode_return(env, random_policy, jax.random.key(0))
    # Docstring: random ~8, controller ~94 (of at most 100) per 100-step episode.
    assert random < 20.0
    assert good > 80.0


def test_point_reach_dict_matches_flat_env():
    key, action = jax.random.key(4), jnp.array([0.5, -0.2])
    flat = PointReach().step(PointReach().reset(key), action)
    tree = PointReachDict().step(PointReachDict().reset(key), action)
    np.testing.assert_array_equal(tree.obs["state"], flat.obs[:4])
    np.testing.assert_array_equal(tree.obs["target"], flat.obs[4:])
    np.testing.assert_array_equal(tree.reward, flat.reward)


def _run_memory_cue(env, key, action_value):
    """Steps until one step past the decision; returns the reset state and all step states."""
    state = env.reset(key)
    states = []
    current = state
    for _ in range(env.decision_step + 2):
        current = env.step(current, jnp.array([action_value], jnp.float32))
        states.append(current)
    return state, states


@pytest.mark.parametrize("delay", [0, 3])
def test_memory_cue_reward_arithmetic(delay):
    env = MemoryCue(delay=delay)
    for seed in range(6):
        first, _ = _run_memory_cue(env, jax.random.key(seed), 1.0)
        cue = float(first.obs[0])
        assert cue in (1.0, -1.0)
        for action, expected in ((cue * 0.7, 1.0), (-cue * 0.7, 0.0), (0.0, 0.0)):
            _, states = _run_memory_cue(env, jax.random.key(seed), action)
            rewards = [float(s.reward) for s in states]
            dones = [float(s.done) for s in states]
            # Steps t = 0 .. delay score 0; the step at t = delay + 1 (index delay + 1)
            # scores 1 iff sign(action) == cue and ends the episode; later steps stay done.
            assert rewards == [0.0] * (delay + 1) + [expected, 0.0]
            assert dones == [0.0] * (delay + 1) + [1.0, 1.0]


def test_memory_cue_observation_timeline():
    env = MemoryCue(delay=4)
    first, states = _run_memory_cue(env, jax.random.key(11), 1.0)
    assert float(first.obs[1]) == 0.0 and abs(float(first.obs[0])) == 1.0
    # states[i] holds the observation for t = i + 1; the decision channel is 1 at t = 5.
    cue_channel = [float(s.obs[0]) for s in states]
    decision_channel = [float(s.obs[1]) for s in states]
    assert cue_channel == [0.0] * len(states)
    assert decision_channel == [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]


def test_memory_cue_decision_observation_does_not_depend_on_cue():
    env = MemoryCue(delay=2)
    decision_obs = {}
    for seed in range(8):
        first, states = _run_memory_cue(env, jax.random.key(seed), 1.0)
        decision_obs[float(first.obs[0])] = np.asarray(states[env.delay].obs)
    assert set(decision_obs) == {1.0, -1.0}
    np.testing.assert_array_equal(decision_obs[1.0], decision_obs[-1.0])


@pytest.mark.parametrize(
    ("env_class", "kwargs", "field"),
    [
        (MemoryCue, {"delay": -1}, "delay"),
        (MemoryCue, {"delay": 2.0}, "delay"),
        (MemoryCue, {"delay": True}, "delay"),
        (PointReach, {"dt": 0.0}, "dt"),
        (PointReach, {"damping": 1.0}, "damping"),
        (PointReach, {"reward_scale": -1.0}, "reward_scale"),
        (PointReachDict, {"dt": "fast"}, "dt"),
    ],
)
def test_invalid_config_raises_value_error_naming_field(env_class, kwargs, field):
    with pytest.raises(ValueError, match=field):
        env_class(**kwargs)


def test_valid_config_is_used():
    assert MemoryCue(delay=0).default_episode_length == 2
    env = PointReach(dt=0.05, damping=0.0, reward_scale=1)
    assert (env.dt, env.damping, env.reward_scale) == (0.05, 0.0, 1.0)
    assert env.unwrapped is env
