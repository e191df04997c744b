"""Resuming a MuJoCo Playground run holds for more than one checkpoint: checkpoint -> load
-> train on -> checkpoint -> load, for PPO with and without a program cache and for
distillation.

An ``mjx.Data`` carries static numpy fields (``_impl.contact.dim`` ...). Restored from a
checkpoint, they come out of a pickle with copied dtype objects (``isbuiltin == 0``); the
program cache's flat boundary hands them on to the next checkpoint unchanged, which refused
them ("unsupported dtype int64") before the checkpoint metadata normalised such dtypes.

The Playground runs are tiny (CartpoleBalance, 4 envs x 4 steps, 4-unit MLPs, no
evaluation, three iterations with a checkpoint after each). Every call's chunk scans
``MAX_ITERATIONS_PER_CALL`` iterations (those left run, the rest are skipped), so every call,
resumed or not, runs one program: compiled once, then served by the persistent compilation
cache or the program cache.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

import jax
import ml_dtypes
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import config as C
from nnx_ppo.algorithms.checkpoint_metadata import decode, encode
from nnx_ppo.algorithms.checkpointing import load_checkpoint, make_checkpoint_fn
from nnx_ppo.algorithms.distillation import (
    load_distillation_state,
    make_distillation_checkpoint_fn,
    train_distillation,
)
from nnx_ppo.algorithms.program_cache import ProgramCache
from nnx_ppo.algorithms.training import train_ppo, training_state_for
from nnx_ppo.presets import make_networks
from tests.algorithms.test_checkpointing import as_numpy, assert_trees_equal, step_dir

N_ENVS, ROLLOUT = 4, 4
ITERATION = N_ENVS * ROLLOUT  # 16 env steps
SPEC = {"kind": "mlp", "actor_hidden_sizes": (4,), "critic_hidden_sizes": (4,)}
NO_EVAL = C.EvalConfig(enabled=False)
PPO_CONFIG = C.TrainConfig(
    ppo=C.PPOConfig(
        n_envs=N_ENVS, rollout_length=ROLLOUT, total_steps=3 * ITERATION, n_minibatches=1
    ),
    eval=NO_EVAL,
    checkpoint_every_steps=ITERATION,
    seed=5,
)
DISTILLATION_CONFIG = C.DistillationTrainConfig(
    distillation=C.DistillationConfig(
        n_envs=N_ENVS, rollout_length=ROLLOUT, total_steps=3 * ITERATION, n_minibatches=1
    ),
    eval=NO_EVAL,
    checkpoint_every_steps=ITERATION,
    seed=5,
)


def copied_dtypes(tree: Any) -> list[str]:
    """The numpy leaves and static numpy fields of ``tree`` whose dtype object is a copy."""
    found = []

    def visit(path: str, x: Any) -> None:
        if isinstance(x, np.ndarray | np.generic) and x.dtype.isbuiltin != 1:
            found.append(f"{path}: {x.dtype}")
        elif hasattr(x, "__dataclass_fields__"):
            for name in x.__dataclass_fields__:
                visit(f"{path}/{name}", getattr(x, name, None))
        elif isinstance(x, tuple | list):
            for i, v in enumerate(x):
                visit(f"{path}/{i}", v)

    visit("", tree)
    return found


def test_numpy_arrays_from_a_pickle_round_trip_with_numpy_dtypes():
    copied = pickle.loads(pickle.dumps((np.arange(3, dtype=np.int64), np.float32(2.5))))
    assert copied[0].dtype.isbuiltin == 0  # a copy of numpy's int64 dtype object
    encoded = encode({"dim": copied[0], "scale": copied[1]}, "state")
    stored = pickle.loads(pickle.dumps(encoded))  # what metadata.pkl gives back
    decoded = decode(stored, "state")
    assert decoded["dim"].dtype.isbuiltin == 1 and decoded["dim"].dtype == np.int64
    np.testing.assert_array_equal(decoded["dim"], [0, 1, 2])
    assert decoded["scale"] == np.float32(2.5) and decoded["scale"].dtype.isbuiltin == 1
    # Dtypes with no numpy equivalent are still refused, naming the field.
    with pytest.raises(TypeError, match="state/half: unsupported dtype bfloat16"):
        encode({"half": np.zeros(2, ml_dtypes.bfloat16)}, "state")


@pytest.fixture(scope="module")
def cartpole() -> Any:
    return envs.load("CartpoleBalance")


def networks(env: Any, seed: int) -> Any:
    return make_networks(SPEC, env.observation_size, env.action_size, seed=seed)


@pytest.mark.slow
@pytest.mark.parametrize("cached", [False, True], ids=["plain", "program-cache"])
def test_ppo_resumes_twice_on_a_playground_env(cartpole, tmp_path, cached):
    lines: list[str] = []
    identity = {"env": "CartpoleBalance"}
    cache = ProgramCache(tmp_path / "programs", identity, log=lines.append) if cached else None
    straight = train_ppo(
        cartpole,
        networks(cartpole, 0),
        PPO_CONFIG,
        checkpoint_fn=make_checkpoint_fn(str(tmp_path / "straight"), PPO_CONFIG),
        program_cache=cache,
    )

    def train(ts: Any, stop: bool) -> Any:
        """Trains on from ``ts``: one iteration and its checkpoint when ``stop``, else to
        the end (the service's warm stop and resume, with the run's config unchanged)."""
        return train_ppo(
            cartpole,
            ts.networks,
            PPO_CONFIG,
            initial_state=ts,
            checkpoint_fn=make_checkpoint_fn(str(tmp_path), PPO_CONFIG),
            should_stop=lambda: stop,
            program_cache=cache,
        )

    def load(step: int, seed: int) -> Any:
        template = training_state_for(cartpole, networks(cartpole, seed), PPO_CONFIG)
        ckpt = load_checkpoint(step_dir(tmp_path, step), template.networks, template.optimizer)
        assert ckpt["step"] == step
        return ckpt["training_state"]

    train(training_state_for(cartpole, networks(cartpole, 0), PPO_CONFIG), stop=True)
    first = load(ITERATION, seed=1)
    train(first, stop=True)  # raised TypeError at its checkpoint with the cache
    second = load(2 * ITERATION, seed=2)
    resumed = train(second, stop=False)
    if cached:  # every call ran through the cache's flat boundary (one program per length)
        # One program for every call: each resumed call loads the one the first stored.
        actions = ["stored", "loaded", "loaded", "loaded"]
        assert [line.split()[2] for line in lines if "train_chunk" in line] == actions, lines
    assert [d for d in sorted(os.listdir(tmp_path)) if d.startswith("step_")] == [
        "step_0000000016",
        "step_0000000032",
        "step_0000000048",
    ]
    final = load(3 * ITERATION, seed=3)
    assert copied_dtypes((first.env_states, final.env_states)) == []  # normalised at load
    # Resumed twice, the run ends where the straight one does, bit for bit.
    for ts in (resumed.training_state, final):
        assert_trees_equal(
            as_numpy(nnx.state(ts.networks)), as_numpy(nnx.state(straight.training_state.networks))
        )
        assert_trees_equal(as_numpy(ts.env_states), as_numpy(straight.training_state.env_states))


@pytest.mark.slow
def test_distillation_resumes_twice_on_a_playground_env(cartpole, tmp_path):
    teacher = networks(cartpole, 0)  # untrained: imitating it is enough to checkpoint
    checkpoint_fn = make_distillation_checkpoint_fn(str(tmp_path))

    def load(step: int, seed: int) -> Any:
        path = step_dir(tmp_path, step)
        student = networks(cartpole, seed)
        state = load_distillation_state(path, cartpole, student, teacher, DISTILLATION_CONFIG)
        assert int(state.steps_taken) == step
        assert copied_dtypes(state.env_states) == []
        return state

    def train(state: Any, stop: bool) -> Any:
        student = networks(cartpole, 1) if state is None else state.student
        return train_distillation(
            cartpole,
            student,
            teacher,
            DISTILLATION_CONFIG,
            initial_state=state,
            checkpoint_fn=checkpoint_fn,
            should_stop=lambda: stop,
        )

    train(None, stop=True)
    train(load(ITERATION, seed=2), stop=True)
    resumed = train(load(2 * ITERATION, seed=3), stop=False)
    final = load(3 * ITERATION, seed=4)
    assert int(resumed.training_state.steps_taken) == 3 * ITERATION
    assert_trees_equal(
        as_numpy(nnx.state(final.student, nnx.Param)),
        as_numpy(nnx.state(resumed.training_state.student, nnx.Param)),
    )
    assert jax.tree.structure(final.env_states) == jax.tree.structure(
        resumed.training_state.env_states
    )
