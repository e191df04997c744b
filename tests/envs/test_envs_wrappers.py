"""Tests for EpisodeWrapper."""

import jax
import jax.numpy as jnp
import pytest

from nnx_ppo.envs import EpisodeWrapper, MemoryCue, PointReach, State


class _TerminatesAt:
    """A counter env that terminates on its own when its counter reaches ``terminate_at``."""

    observation_size = 1
    action_size = 1
    extra_attribute = "forwarded"

    def __init__(self, terminate_at: int):
        self.terminate_at = terminate_at

    def reset(self, rng: jax.Array) -> State:
        del rng
        zero = jnp.zeros((), jnp.float32)
        return State(data=jnp.zeros((), jnp.int32), obs=jnp.zeros(1), reward=zero, done=zero)

    def step(self, state: State, action: jax.Array) -> State:
        t = state.data + 1
        done = (t >= self.terminate_at).astype(jnp.float32)
        return state.replace(data=t, obs=jnp.ones(1), done=done)


def _roll(env, n_steps: int) -> list[State]:
    state = jax.jit(env.reset)(jax.random.key(0))
    step = jax.jit(env.step)
    states = [state]
    for _ in range(n_steps):
        state = step(state, jnp.zeros((env.action_size,)))
        states.append(state)
    return states


def _flags(states: list[State]) -> tuple[list[float], list[float], list[float]]:
    return (
        [float(s.done) for s in states],
        [float(s.info["truncated"]) for s in states],
        [float(s.info["steps"]) for s in states],
    )


def test_truncates_exactly_at_limit():
    env = EpisodeWrapper(_TerminatesAt(terminate_at=100), episode_length=3)
    done, truncated, steps = _flags(_roll(env, 4))
    # reset, then steps 1, 2, 3 (= limit), 4 (past the limit: still done, still truncated).
    assert steps == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert done == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert truncated == [0.0, 0.0, 0.0, 1.0, 1.0]


def test_termination_at_the_limit_is_not_a_truncation():
    env = EpisodeWrapper(_TerminatesAt(terminate_at=3), episode_length=3)
    done, truncated, _ = _flags(_roll(env, 3))
    assert done == [0.0, 0.0, 0.0, 1.0]
    assert truncated == [0.0, 0.0, 0.0, 0.0]


def test_termination_before_the_limit_is_not_a_truncation():
    env = EpisodeWrapper(_TerminatesAt(terminate_at=2), episode_length=5)
    done, truncated, _ = _flags(_roll(env, 2))
    assert done == [0.0, 0.0, 1.0]
    assert truncated == [0.0, 0.0, 0.0]


def test_memory_cue_at_its_natural_length_terminates_without_truncation():
    env = EpisodeWrapper(MemoryCue(delay=1), episode_length=3)
    done, truncated, _ = _flags(_roll(env, 3))
    assert done == [0.0, 0.0, 0.0, 1.0]
    assert truncated == [0.0, 0.0, 0.0, 0.0]


def test_reset_restarts_the_counter():
    env = EpisodeWrapper(_TerminatesAt(terminate_at=100), episode_length=2)
    last = _roll(env, 2)[-1]
    assert float(last.done) == 1.0
    fresh = env.reset(jax.random.key(1))
    assert float(fresh.info["steps"]) == 0.0 and float(fresh.info["truncated"]) == 0.0
    again = env.step(fresh, jnp.zeros((1,)))
    assert float(again.info["steps"]) == 1.0 and float(again.done) == 0.0


def test_vmapped_counters_and_dtypes():
    env = EpisodeWrapper(PointReach(), episode_length=2)
    keys = jax.random.split(jax.random.key(0), 4)
    states = jax.jit(jax.vmap(env.reset))(keys)
    step = jax.jit(jax.vmap(env.step))
    actions = jnp.zeros((4, 2))
    states = step(step(states, actions), actions)
    for key in ("steps", "truncated"):
        assert states.info[key].shape == (4,) and states.info[key].dtype == jnp.float32
    assert states.done.dtype == jnp.float32
    assert states.done.tolist() == [1.0] * 4 and states.info["truncated"].tolist() == [1.0] * 4


def test_forwards_sizes_and_attributes():
    inner = _TerminatesAt(terminate_at=5)
    env = EpisodeWrapper(inner, episode_length=4)
    assert env.observation_size == 1 and env.action_size == 1
    assert env.extra_attribute == "forwarded"
    assert env.unwrapped is inner
    assert EpisodeWrapper(env, episode_length=2).unwrapped is inner
    reach = PointReach()
    assert EpisodeWrapper(reach, 10).unwrapped is reach
    with pytest.raises(AttributeError):
        _ = env.no_such_attribute


@pytest.mark.parametrize("bad", [0, -3, 2.5, "10", True, None])
def test_invalid_episode_length_raises(bad):
    with pytest.raises(ValueError, match="episode_length"):
        EpisodeWrapper(PointReach(), episode_length=bad)
