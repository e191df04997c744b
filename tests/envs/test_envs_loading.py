"""Tests for loading environments by name."""

import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from nnx_ppo.envs import (
    EpisodeWrapper,
    MemoryCue,
    PointReach,
    PointReachDict,
    available_envs,
    describe,
    load,
)
from nnx_ppo.envs.loading import default_impl


def test_load_builtin_with_defaults():
    env = load("PointReach")
    assert isinstance(env, EpisodeWrapper)
    assert isinstance(env.unwrapped, PointReach)
    assert env.episode_length == 100
    assert (env.observation_size, env.action_size) == (6, 2)


def test_load_builtin_with_overrides():
    env = load("MemoryCue", {"delay": 7})
    assert isinstance(env.unwrapped, MemoryCue) and env.unwrapped.delay == 7
    assert env.episode_length == 9  # delay + 2: the env's own episode length.
    env = load("PointReachDict", {"episode_length": 25, "damping": 0.5})
    assert isinstance(env.unwrapped, PointReachDict)
    assert env.episode_length == 25 and env.unwrapped.damping == 0.5
    state = env.reset(jax.random.key(0))
    assert float(state.info["steps"]) == 0.0


def test_load_does_not_mutate_overrides():
    overrides = {"delay": 1, "episode_length": 5}
    load("MemoryCue", overrides)
    assert overrides == {"delay": 1, "episode_length": 5}


def test_unknown_builtin_override_raises_naming_it():
    with pytest.raises(ValueError, match="dalay") as info:
        load("MemoryCue", {"dalay": 3})
    assert "delay" in str(info.value)  # the accepted keys are listed


def test_invalid_builtin_override_values_raise():
    with pytest.raises(ValueError, match="delay"):
        load("MemoryCue", {"delay": -2})
    with pytest.raises(ValueError, match="episode_length"):
        load("PointReach", {"episode_length": 0})


def test_unknown_name_lists_available_envs():
    with pytest.raises(ValueError, match="NoSuchEnv") as info:
        load("NoSuchEnv")
    message = str(info.value)
    assert "PointReach" in message and "MemoryCue" in message
    assert "CartpoleBalance" in message


def test_available_envs_lists_builtin_then_playground():
    names = available_envs()
    assert names[:4] == ["PointReach", "PointReachDict", "PointReachEnergy", "MemoryCue"]
    assert "CartpoleBalance" in names
    assert len(names) == len(set(names))


def test_describe_builtin():
    assert describe("MemoryCue") == {
        "name": "MemoryCue",
        "observation_size": 2,
        "action_size": 1,
        "source": "builtin",
    }
    assert describe("PointReachDict")["observation_size"] == {"state": (4,), "target": (2,)}
    with pytest.raises(ValueError, match="NoSuchEnv"):
        describe("NoSuchEnv")


def test_importing_envs_does_not_import_playground():
    code = "import sys, nnx_ppo.envs; assert 'mujoco_playground' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_unknown_playground_override_raises_naming_it():
    with pytest.raises(ValueError, match="not_a_field"):
        load("CartpoleBalance", {"not_a_field": 1})
    with pytest.raises(ValueError, match=r"vision_config\.nope"):
        load("CartpoleBalance", {"vision_config.nope": 1})


def test_default_impl_is_jax_on_cpu_and_without_warp_else_playgrounds():
    assert default_impl("cpu", warp_installed=True) == "jax"
    assert default_impl("cpu", warp_installed=False) == "jax"
    # A GPU machine without warp-lang (the bare GPU check carries no 400 MB of warp): MJX-JAX.
    assert default_impl("gpu", warp_installed=False) == "jax"
    assert default_impl("gpu", warp_installed=True) is None  # Playground's own default


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="impl default only applies on CPU")
def test_load_playground_cartpole_on_cpu():
    env = load("CartpoleBalance", {"episode_length": 50})
    assert env.unwrapped.mjx_model.impl.value == "jax"
    assert env.episode_length == 50
    assert (env.observation_size, env.action_size) == (5, 1)
    state = jax.jit(env.reset)(jax.random.key(0))
    state = jax.jit(env.step)(state, jnp.zeros((1,)))
    assert state.obs.shape == (5,)
    assert state.reward.shape == () and state.done.dtype == jnp.float32
    assert float(state.info["steps"]) == 1.0 and float(state.info["truncated"]) == 0.0
    assert float(state.done) == 0.0
