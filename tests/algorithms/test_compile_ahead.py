"""``CompiledAhead``: a program compiled in a background thread, and the host loop compiling its
training chunk and its evaluator that way, at once."""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import host_loop, program_cache
from nnx_ppo.algorithms.compile_ahead import CompiledAhead
from nnx_ppo.algorithms.config import EvalConfig, PPOConfig, TrainConfig
from nnx_ppo.algorithms.program_cache import ProgramCache
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


class Recorded(CompiledAhead):
    """``CompiledAhead`` that says which were made and in which thread each compiled."""

    made: ClassVar[list[Recorded]] = []
    compiled_in: ClassVar[list[str]] = []

    def __init__(self, jitted: Any, *args: Any):
        super().__init__(jitted, *args)
        Recorded.made.append(self)

    def _compile(self, lowered: Any) -> None:
        Recorded.compiled_in.append(threading.current_thread().name)
        super()._compile(lowered)


ENV = envs.load("PointReach", {"episode_length": 20})
CONFIG = TrainConfig(
    ppo=PPOConfig(n_envs=8, rollout_length=4, total_steps=96, n_epochs=1, n_minibatches=2),
    eval=EvalConfig(every_steps=64, n_envs=4, max_episode_length=20),
    seed=5,
)


def evaluations(cache: ProgramCache | None = None) -> list[dict[str, Any]]:
    networks = make_mlp_actor_critic(
        ENV.observation_size,
        ENV.action_size,
        rngs=nnx.Rngs(0),
        actor_hidden_sizes=(8,),
        critic_hidden_sizes=(8,),
    )
    return train_ppo(ENV, networks, CONFIG, program_cache=cache).eval_history


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> type[Recorded]:
    monkeypatch.setattr(Recorded, "made", [])
    monkeypatch.setattr(Recorded, "compiled_in", [])
    return Recorded


@pytest.fixture(scope="module")
def plain() -> list[dict[str, Any]]:
    """The evaluations with the plain programs, each compiled at its first call."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(host_loop, "CompiledAhead", lambda jitted, *args: jitted)
        return evaluations()


def test_the_host_loop_compiles_its_programs_ahead_and_trains_alike(monkeypatch, recorded, plain):
    monkeypatch.setattr(host_loop, "CompiledAhead", recorded)
    ahead = evaluations()
    # The training chunk (called three times: 1 iteration, 1 up to the eval at 64, 1 more)
    # and the evaluator (twice), every call on the program compiled ahead: none fell back.
    assert len(recorded.made) == 2 and all(m.compiled is not None for m in recorded.made)
    assert recorded.compiled_in == ["nnx-ppo-compile-ahead"] * 2
    assert [e["step"] for e in ahead] == [64, 96]
    assert ahead == plain  # the same training and evaluations, bit for bit


def test_cached_programs_are_compiled_ahead_too(monkeypatch, recorded, plain, tmp_path):
    monkeypatch.setattr(program_cache, "CompiledAhead", recorded)
    lines: list[str] = []
    cache = ProgramCache(tmp_path, {"env": "PointReach", "test": "ahead"}, log=lines.append)
    ahead = evaluations(cache)
    assert sorted(line.split(" ")[2:4] for line in lines) == [
        ["stored", "evaluate"],
        ["stored", "train_chunk"],
    ], lines
    assert len(recorded.made) == 2 and all(m.compiled is not None for m in recorded.made)
    assert recorded.compiled_in == ["nnx-ppo-compile-ahead"] * 2
    assert ahead == plain


class _SlowLowered:
    """A lowered program whose compile takes ``seconds`` and records when it ran."""

    def __init__(self, spans: list[tuple[str, float, float]], name: str, seconds: float):
        self.spans, self.name, self.seconds = spans, name, seconds

    def compile(self) -> Any:
        start = time.perf_counter()
        time.sleep(self.seconds)
        self.spans.append((self.name, start, time.perf_counter()))
        return lambda *args: self.name


class _Lowerable:
    def __init__(self, lowered: _SlowLowered):
        self.lowered = lowered

    def lower(self, *args: Any) -> _SlowLowered:
        return self.lowered


def test_background_compiles_run_one_at_a_time_in_the_order_lowered():
    spans: list[tuple[str, float, float]] = []
    chunk = CompiledAhead(_Lowerable(_SlowLowered(spans, "chunk", 0.3)))
    evaluator = CompiledAhead(_Lowerable(_SlowLowered(spans, "evaluator", 0.1)))
    assert evaluator() == "evaluator" and chunk() == "chunk"
    (first, _, first_end), (second, second_start, _) = spans
    assert (first, second) == ("chunk", "evaluator")
    assert second_start >= first_end
