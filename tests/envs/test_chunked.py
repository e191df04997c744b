"""Stepping the training envs a chunk at a time (``PPOConfig.env_step_chunk``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms.config import EvalConfig, PPOConfig, TrainConfig
from nnx_ppo.algorithms.rollout import reset_envs
from nnx_ppo.algorithms.training import train_ppo
from nnx_ppo.envs.chunked import StepInChunks, step_envs, step_in_chunks
from tests.algorithms.test_checkpointing import make_networks

ENV = envs.load("PointReach", {"episode_length": 20})
N_ENVS = 8


def _batch(env: Any, n_envs: int) -> tuple[Any, jax.Array]:
    states = reset_envs(env, jax.random.split(jax.random.key(0), n_envs))
    actions = jax.random.uniform(jax.random.key(1), (n_envs, env.action_size), minval=-1.0)
    return states, actions


def _assert_states_close(left: Any, right: Any, rtol: float) -> None:
    leaves_left, leaves_right = jax.tree.leaves(left), jax.tree.leaves(right)
    assert len(leaves_left) == len(leaves_right)
    for a, b in zip(leaves_left, leaves_right, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("chunk", [1, 2, 4, N_ENVS])
def test_chunked_step_is_the_batched_step(chunk: int) -> None:
    states, actions = _batch(ENV, N_ENVS)
    whole = jax.jit(jax.vmap(ENV.step))(states, actions)
    chunked = jax.jit(lambda s, a: step_envs(StepInChunks(ENV, chunk), s, a))(states, actions)
    _assert_states_close(chunked, whole, rtol=1e-6)
    # the envs stayed in their places: env i's state came from env i's action
    assert not np.allclose(np.asarray(chunked.obs[0]), np.asarray(chunked.obs[1]))
    program = str(
        jax.make_jaxpr(lambda s, a: step_envs(StepInChunks(ENV, chunk), s, a))(states, actions)
    )
    if chunk < N_ENVS:  # a loop over the chunks
        assert f"length={N_ENVS // chunk}" in program
    else:
        assert "scan" not in program


def test_dict_actions_step_in_chunks() -> None:
    env = envs.TwoArmReach()
    states = reset_envs(env, jax.random.split(jax.random.key(0), N_ENVS))
    keys = jax.random.split(jax.random.key(1))
    actions = {
        arm: jax.random.uniform(key, (N_ENVS, 2), minval=-1.0)
        for arm, key in zip(("left", "right"), keys, strict=True)
    }
    whole = jax.jit(jax.vmap(env.step))(states, actions)
    chunked = jax.jit(lambda s, a: step_envs(StepInChunks(env, 2), s, a))(states, actions)
    _assert_states_close(chunked, whole, rtol=1e-6)


def test_a_playground_env_steps_the_same_physics_in_chunks() -> None:
    env = envs.load("CartpoleSwingup")
    states, actions = _batch(env, 16)
    whole = jax.jit(jax.vmap(env.step))(states, actions)
    chunked = jax.jit(lambda s, a: step_envs(StepInChunks(env, 4), s, a))(states, actions)
    _assert_states_close(chunked.data.qpos, whole.data.qpos, rtol=1e-5)
    _assert_states_close((chunked.obs, chunked.reward), (whole.obs, whole.reward), rtol=1e-5)


def test_a_batch_that_does_not_split_is_refused() -> None:
    states, actions = _batch(ENV, 6)
    with pytest.raises(ValueError, match="6 envs do not split into chunks of 4"):
        step_envs(StepInChunks(ENV, 4), states, actions)
    with pytest.raises(ValueError, match="chunk must be a positive int"):
        StepInChunks(ENV, 0)


def test_the_wrapper_is_the_env_otherwise() -> None:
    wrapped = step_in_chunks(ENV, 2)
    assert isinstance(wrapped, StepInChunks)
    assert (wrapped.observation_size, wrapped.action_size) == (
        ENV.observation_size,
        ENV.action_size,
    )
    assert wrapped.episode_length == ENV.episode_length
    assert step_in_chunks(ENV, None) is ENV


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"env_step_chunk": 3}, "ppo.env_step_chunk must be None or a divisor of ppo.n_envs"),
        ({"env_step_chunk": 0}, "ppo.env_step_chunk must be a positive integer"),
        ({"env_step_chunk": True}, "ppo.env_step_chunk must be a positive integer"),
    ],
)
def test_config_refuses_a_chunk_that_does_not_divide(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PPOConfig(n_envs=N_ENVS, n_minibatches=2, **fields)


def test_config_refuses_chunks_on_several_devices() -> None:
    ppo = PPOConfig(n_envs=N_ENVS, n_minibatches=2, env_step_chunk=4)
    with pytest.raises(ValueError, match=r"config\.devices must be None or 1"):
        TrainConfig(ppo=ppo, devices=2)


def test_training_in_chunks_gives_the_same_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """PointReach's arithmetic does not depend on the batch's width, so the two runs agree."""
    widths: list[int] = []
    step_batch = StepInChunks.step_batch

    def seen(self: StepInChunks, state: Any, actions: jax.Array) -> Any:
        widths.append(self.chunk)
        return step_batch(self, state, actions)

    monkeypatch.setattr(StepInChunks, "step_batch", seen)
    ppo = PPOConfig(n_envs=N_ENVS, rollout_length=8, total_steps=128, n_epochs=1, n_minibatches=2)
    evaluation = EvalConfig(n_envs=4, max_episode_length=20, every_steps=64)

    def run(chunk: int | None) -> tuple[list[dict[str, float]], Any]:
        config = TrainConfig(ppo=dataclasses.replace(ppo, env_step_chunk=chunk), eval=evaluation)
        logs: list[dict[str, float]] = []
        result = train_ppo(ENV, make_networks(), config, log_fn=lambda m, _: logs.append(m))
        return logs, nnx.state(result.training_state.networks, nnx.Param)

    logs_whole, params_whole = run(None)
    assert widths == []
    logs_chunked, params_chunked = run(2)
    assert widths and set(widths) == {2}  # the training program stepped its envs in chunks
    assert len(logs_whole) == len(logs_chunked) == 2
    for whole, chunked in zip(logs_whole, logs_chunked, strict=True):
        losses = [k for k in whole if k.startswith("losses/")]
        assert losses
        np.testing.assert_allclose([chunked[k] for k in losses], [whole[k] for k in losses], 1e-5)
        assert chunked["eval/episode_reward"] == pytest.approx(whole["eval/episode_reward"], 1e-5)
    _assert_states_close(params_chunked, params_whole, rtol=1e-5)
