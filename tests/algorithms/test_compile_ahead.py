"""``CompiledAhead``: a program compiled in a background thread, and the host loop compiling its
evaluator that way beside the first training chunk."""

from __future__ import annotations

import threading
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import host_loop
from nnx_ppo.algorithms.compile_ahead import CompiledAhead
from nnx_ppo.algorithms.config import EvalConfig, PPOConfig, TrainConfig
from nnx_ppo.algorithms.training import train_ppo
from nnx_ppo.networks.factories import make_mlp_actor_critic


def test_the_first_call_runs_the_program_compiled_in_the_background():
    jitted = jax.jit(lambda x, k: jnp.tanh(x @ x.T) + jax.random.normal(k, (4, 4)))
    x, key = jnp.arange(12.0).reshape(4, 3) / 10, jax.random.key(3)
    ahead = CompiledAhead(jitted, x, key)
    assert ahead.thread.name == "nnx-ppo-compile-ahead"
    out = ahead(x, key)
    assert ahead.compiled is not None
    assert jitted._cache_size() == 0  # the plain jit never compiled
    np.testing.assert_array_equal(out, jax.jit(jitted.__wrapped__)(x, key))
    np.testing.assert_array_equal(ahead(x + 1, key), jitted(x + 1, key))  # and again


def test_arguments_of_another_shape_fall_back_to_the_plain_jit():
    jitted = jax.jit(lambda x: 2 * x)
    ahead = CompiledAhead(jitted, jnp.ones(3))
    np.testing.assert_array_equal(ahead(jnp.ones(5)), 2 * np.ones(5))
    assert ahead.compiled is None and jitted._cache_size() == 1


def test_the_host_loop_compiles_its_evaluator_ahead_and_evaluates_alike(monkeypatch):
    made: list[CompiledAhead] = []
    compiling: list[str] = []

    class Recorded(CompiledAhead):
        def __init__(self, jitted: Any, *args: Any):
            super().__init__(jitted, *args)
            made.append(self)

        def _compile(self, lowered: Any) -> None:
            compiling.append(threading.current_thread().name)
            super()._compile(lowered)

    env = envs.load("PointReach", {"episode_length": 20})
    config = TrainConfig(
        ppo=PPOConfig(n_envs=8, rollout_length=4, total_steps=96, n_epochs=1, n_minibatches=2),
        eval=EvalConfig(every_steps=64, n_envs=4, max_episode_length=20),
        seed=5,
    )

    def train() -> Any:
        networks = make_mlp_actor_critic(
            env.observation_size,
            env.action_size,
            rngs=nnx.Rngs(0),
            actor_hidden_sizes=(8,),
            critic_hidden_sizes=(8,),
        )
        return train_ppo(env, networks, config).eval_history

    monkeypatch.setattr(host_loop, "CompiledAhead", lambda jitted, *args: jitted)
    plain = train()  # the plain evaluator, compiled at its first call, for reference
    monkeypatch.setattr(host_loop, "CompiledAhead", Recorded)
    ahead = train()
    assert len(made) == 1 and made[0].compiled is not None  # used, not fallen back
    assert compiling == ["nnx-ppo-compile-ahead"]
    assert [e["step"] for e in ahead] == [64, 96]
    assert ahead == plain  # the same evaluations, bit for bit
