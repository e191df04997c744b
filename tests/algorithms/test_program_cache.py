"""The program cache (``jax.export`` of the jitted training chunk and evaluator, on disk).

The unit tests use a tiny function over a pytree carry with a PRNG key (milliseconds to
compile); one test trains the tiny ``test_train_loop`` configuration three times: without a
cache, with an empty one (stores) and with the filled one (loads), and compares every
result bit for bit; one stops a distillation run and resumes it from its checkpoint.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms.config import (
    DistillationConfig,
    DistillationTrainConfig,
    EvalConfig,
    PPOConfig,
    TrainConfig,
)
from nnx_ppo.algorithms.distillation import (
    load_distillation_state,
    make_distillation_checkpoint_fn,
    train_distillation,
)
from nnx_ppo.algorithms.program_cache import MAGIC, ProgramCache
from nnx_ppo.algorithms.training import train_ppo
from nnx_ppo.networks.factories import make_mlp_actor_critic


@dataclasses.dataclass
class Carry:
    """A custom pytree node, as ``LoopCarry`` and ``nnx.State`` are."""

    weights: dict[str, jax.Array]
    key: jax.Array


jax.tree_util.register_dataclass(Carry, data_fields=["weights", "key"], meta_fields=[])


def step(carry: Carry, scale: jax.Array) -> tuple[Carry, dict[str, jax.Array]]:
    key, noise_key = jax.random.split(carry.key)
    w = carry.weights["w"] * scale + jax.random.normal(noise_key, carry.weights["w"].shape)
    return Carry({"w": w}, key), {"norm": jnp.sum(w * w), "nested": {"max": jnp.max(w)}}


def carry() -> Carry:
    return Carry({"w": jnp.arange(6.0).reshape(2, 3)}, jax.random.key(3))


def leaves(tree: Any) -> list[np.ndarray]:
    return [
        np.asarray(jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x)
        for x in jax.tree.leaves(tree)
    ]


def assert_identical(a: Any, b: Any) -> None:
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(leaves(a), leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)


def cache_at(tmp_path, lines: list[str], **identity: Any) -> ProgramCache:
    return ProgramCache(tmp_path / "programs", {"test": "step", **identity}, log=lines.append)


def test_stores_then_loads_the_same_program(tmp_path):
    expected = jax.jit(step)(carry(), jnp.float32(0.5))
    lines: list[str] = []
    first = cache_at(tmp_path, lines).jit("step", step, {"v": 1}, donate_argnums=0)
    given = carry()
    out = first(given, jnp.float32(0.5))
    assert first.source == "stored" and lines[-1].startswith("program cache: stored step (step-")
    assert given.weights["w"].is_deleted()  # the carry is donated through the stored program
    assert_identical(out, expected)
    assert_identical(first(*out[:1], jnp.float32(0.5)), jax.jit(step)(expected[0], 0.5))

    second = cache_at(tmp_path, lines).jit("step", step, {"v": 1}, donate_argnums=0)
    assert_identical(second(carry(), jnp.float32(0.5)), expected)
    assert second.source == "loaded" and lines[-1].startswith("program cache: loaded step (step-")
    assert len(list((tmp_path / "programs").iterdir())) == 1


@pytest.mark.parametrize(
    "damage",
    [
        lambda blob: blob[: len(blob) // 2],  # truncated
        lambda blob: blob[:-40] + bytes(40),  # zeroed tail: checksum mismatch
        lambda blob: b"garbage",
        lambda blob: blob.replace(b'"digest": "', b'"digest": "0', 1),  # stored for another key
    ],
    ids=["truncated", "zeroed", "garbage", "stale"],
)
def test_a_damaged_or_stale_entry_is_ignored_with_one_line(tmp_path, damage):
    lines: list[str] = []
    cache_at(tmp_path, lines).jit("step", step, {"v": 1})(carry(), jnp.float32(2.0))
    (path,) = (tmp_path / "programs").iterdir()
    path.write_bytes(damage(path.read_bytes()))
    lines.clear()
    again = cache_at(tmp_path, lines).jit("step", step, {"v": 1})
    assert_identical(again(carry(), jnp.float32(2.0)), jax.jit(step)(carry(), 2.0))
    assert again.source == "stored"  # traced again and replaced
    assert len(lines) == 2 and lines[0].startswith(f"program cache: ignoring {path.name} (")
    assert path.read_bytes().startswith(MAGIC)


def test_the_key_changes_with_static_identity_and_shapes(tmp_path):
    lines: list[str] = []
    cache = cache_at(tmp_path, lines)
    digest = cache.digest("step", {"v": 1}, (carry(), jnp.float32(1)))
    assert digest == cache_at(tmp_path, []).digest("step", {"v": 1}, (carry(), jnp.float32(1)))
    wider = Carry({"w": jnp.zeros((2, 4))}, jax.random.key(0))
    others = {
        cache.digest("step", {"v": 2}, (carry(), jnp.float32(1))),
        cache_at(tmp_path, [], env="B").digest("step", {"v": 1}, (carry(), jnp.float32(1))),
        cache.digest("step", {"v": 1}, (wider, jnp.float32(1))),
        cache.digest("step", {"v": 1}, (carry(), jnp.int32(1))),
        cache.digest("other", {"v": 1}, (carry(), jnp.float32(1))),
    }
    assert digest not in others and len(others) == 5


def test_a_result_that_cannot_cross_the_boundary_runs_as_plain_jit(tmp_path):
    lines: list[str] = []

    def new_key(c: Carry) -> jax.Array:
        return jax.random.split(c.key)[0]  # a key outside the arguments' structure

    program = cache_at(tmp_path, lines).jit("new_key", new_key, {})
    assert_identical(program(carry()), jax.jit(new_key)(carry()))
    assert program.source == "plain" and "not cacheable" in lines[-1]
    assert not (tmp_path / "programs").exists()


def test_an_unwritable_directory_is_a_log_line(tmp_path):
    (tmp_path / "programs").write_text("a file where the folder should be")
    lines: list[str] = []
    program = cache_at(tmp_path, lines).jit("step", step, {})
    assert_identical(program(carry(), jnp.float32(1)), jax.jit(step)(carry(), 1.0))
    assert program.source == "traced" and "could not store" in lines[-1]


# -- train_ppo -----------------------------------------------------------------------------

ENV = envs.load("PointReach", {"episode_length": 20})
CONFIG = TrainConfig(  # test_train_loop's configuration, 32 iterations: one jitted call
    ppo=PPOConfig(n_envs=8, rollout_length=4, total_steps=1024, n_epochs=1, n_minibatches=2),
    eval=EvalConfig(every_steps=100, n_envs=4, max_episode_length=30),
    seed=17,
)


def train(program_cache: ProgramCache | None) -> tuple[Any, list[Any]]:
    networks = make_mlp_actor_critic(
        ENV.observation_size,
        ENV.action_size,
        rngs=nnx.Rngs(0),
        actor_hidden_sizes=(8,),
        critic_hidden_sizes=(8,),
    )
    logs: list[Any] = []
    result = train_ppo(
        ENV,
        networks,
        CONFIG,
        log_fn=lambda m, s: logs.append((s, m)),
        program_cache=program_cache,
    )
    return result, logs


def test_train_ppo_is_bit_identical_with_a_cold_and_a_warm_cache(tmp_path):
    plain, plain_logs = train(None)
    lines: list[str] = []
    cold, cold_logs = train(cache_at(tmp_path, lines, env="PointReach"))
    assert sorted(line.split()[2] for line in lines) == ["stored", "stored"]
    lines.clear()
    warm, warm_logs = train(cache_at(tmp_path, lines, env="PointReach"))
    assert sorted(line.split(" ")[2:4] for line in lines) == [
        ["loaded", "evaluate"],
        ["loaded", "train_chunk"],
    ]
    for other, logs in ((cold, cold_logs), (warm, warm_logs)):
        assert logs == plain_logs  # every metric of every iteration, evals included
        assert other.eval_history == plain.eval_history
        assert_identical(
            nnx.state(other.training_state.networks), nnx.state(plain.training_state.networks)
        )
        assert_identical(other.training_state.env_states, plain.training_state.env_states)
        assert_identical(other.training_state.rng_key, plain.training_state.rng_key)


# -- train_distillation ----------------------------------------------------------------------

DISTILL = DistillationTrainConfig(  # 64 iterations of 32 steps: two full chunks of 32
    distillation=DistillationConfig(
        n_envs=8, rollout_length=4, total_steps=2048, n_epochs=1, n_minibatches=2
    ),
    eval=EvalConfig(every_steps=512, n_envs=4, max_episode_length=30),
    seed=5,
)


def network(seed: int) -> nnx.Module:
    return make_mlp_actor_critic(
        ENV.observation_size,
        ENV.action_size,
        rngs=nnx.Rngs(seed),
        actor_hidden_sizes=(8,),
        critic_hidden_sizes=(8,),
    )


def test_a_resumed_distillation_run_reuses_the_cached_programs(tmp_path):
    """A run stopped at its first evaluation (as a worker's run is interrupted) and resumed
    from its checkpoint traces its programs once: the resumed call loads both. Every metric
    and the final state are those of one uninterrupted run without a cache."""
    teacher = network(1)
    plain_logs: list[Any] = []
    plain = train_distillation(
        ENV, network(0), teacher, DISTILL, log_fn=lambda m, s: plain_logs.append((s, m))
    )

    lines: list[str] = []
    logs: list[Any] = []
    directory = str(tmp_path / "checkpoints")
    train_distillation(
        ENV,
        network(0),
        teacher,
        DISTILL,
        log_fn=lambda m, s: logs.append((s, m)),
        checkpoint_fn=make_distillation_checkpoint_fn(directory),
        should_stop=lambda: logs[-1][0] >= 512,  # after the call that ends at the eval at 512
        program_cache=cache_at(tmp_path, lines, env="PointReach"),
    )
    assert sorted(line.split(" ")[2:4] for line in lines) == [
        ["stored", "evaluate"],
        ["stored", "train_chunk"],
    ]
    lines.clear()
    path = f"{directory}/step_{512:010d}"
    initial = load_distillation_state(path, ENV, network(2), teacher, DISTILL)
    resumed = train_distillation(
        ENV,
        network(2),
        teacher,
        DISTILL,
        log_fn=lambda m, s: logs.append((s, m)),
        initial_state=initial,
        program_cache=cache_at(tmp_path, lines, env="PointReach"),
    )
    assert sorted(line.split(" ")[2:4] for line in lines) == [
        ["loaded", "evaluate"],
        ["loaded", "train_chunk"],
    ]
    assert logs == plain_logs
    assert resumed.eval_history == [e for e in plain.eval_history if e["step"] > 512]
    assert_identical(
        nnx.state(resumed.training_state.student), nnx.state(plain.training_state.student)
    )
    assert_identical(resumed.training_state.rng_key, plain.training_state.rng_key)
