"""Checkpoints: on-disk layout, exact resume, atomic writes, mismatch errors, safe loading.

The exact-resume runs share one configuration (``CONFIG``) whose halves are 32 PPO iterations
each, a full chunk (``MAX_ITERATIONS_PER_CALL``); every ``train_ppo`` call runs the one
compiled chunk (the persistent compilation cache serves the repeats), so the straight and
resumed runs execute the very same program.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from flax import nnx, struct

from nnx_ppo import envs
from nnx_ppo.algorithms import checkpointing
from nnx_ppo.algorithms.checkpointing import (
    load_checkpoint,
    make_checkpoint_fn,
    save_checkpoint,
)
from nnx_ppo.algorithms.config import EvalConfig, PPOConfig, TrainConfig
from nnx_ppo.algorithms.step import new_training_state
from nnx_ppo.algorithms.training import MAX_ITERATIONS_PER_CALL, train_ppo
from nnx_ppo.algorithms.types import LoggingLevel, TrainingState
from nnx_ppo.networks.factories import make_lstm_actor_critic, make_mlp_actor_critic

ENV = envs.load("PointReach", {"episode_length": 20})
N_ENVS, ROLLOUT = 8, 4
PER_ITERATION = N_ENVS * ROLLOUT  # 32 env steps per PPO iteration
HALF = MAX_ITERATIONS_PER_CALL * PER_ITERATION  # 32 iterations = 1024 steps
TOTAL = 2 * HALF
CONFIG = TrainConfig(
    ppo=PPOConfig(
        n_envs=N_ENVS, rollout_length=ROLLOUT, total_steps=TOTAL, n_epochs=1, n_minibatches=2
    ),
    # Evaluations at 512, 1024, 1536 and 2048 (the end): the resumed half has two.
    eval=EvalConfig(every_steps=512, n_envs=4, max_episode_length=20),
    checkpoint_every_steps=HALF,
    seed=17,
)


def make_networks(kind: str = "mlp", seed: int = 0, hidden: int = 8) -> Any:
    rngs = nnx.Rngs(seed)
    sizes = {"actor_hidden_sizes": (hidden,), "critic_hidden_sizes": (hidden,)}
    if kind == "lstm":
        return make_lstm_actor_critic(
            ENV.observation_size, ENV.action_size, rngs=rngs, lstm_size=8, **sizes
        )
    return make_mlp_actor_critic(ENV.observation_size, ENV.action_size, rngs=rngs, **sizes)


def fresh_state(kind: str = "mlp", seed: int = 0, hidden: int = 8) -> TrainingState:
    return new_training_state(ENV, make_networks(kind, seed, hidden), N_ENVS, seed)


def as_numpy(tree: Any) -> Any:
    """Leaves as numpy arrays; PRNG keys as their raw key data."""

    def leaf(x: Any) -> np.ndarray:
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            return np.asarray(jax.random.key_data(x))
        return np.asarray(x)

    return jax.tree.map(leaf, tree)


def everything(ts: TrainingState) -> Any:
    """Every value a TrainingState carries, networks and optimizer included, as numpy."""
    modules = (nnx.state(ts.networks), nnx.state(ts.optimizer))
    rest = (ts.network_states, ts.env_states, ts.rng_key, ts.steps_taken)
    return as_numpy((modules, rest))


def assert_trees_equal(actual: Any, expected: Any) -> None:
    assert jax.tree.structure(actual) == jax.tree.structure(expected)
    for a, b in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def differs(a: Any, b: Any) -> bool:
    return not all(jax.tree.leaves(jax.tree.map(np.array_equal, as_numpy(a), as_numpy(b))))


def step_dir(directory: Any, step: int) -> str:
    return os.path.join(directory, f"step_{step:010d}")


def entries(directory: Any) -> list[str]:
    return sorted(os.listdir(directory))


# --- Exact resume -------------------------------------------------------------------------


def train(networks: Any, logs: list, **kwargs: Any) -> Any:
    def log_fn(metrics: dict[str, float], step: int) -> None:
        logs.append((step, dict(metrics)))

    return train_ppo(ENV, networks, CONFIG, log_fn=log_fn, **kwargs)


@pytest.mark.parametrize("kind", ["mlp", "lstm"])
def test_resuming_from_a_checkpoint_is_bitwise_exact(tmp_path, kind):
    straight_logs: list = []
    straight = train(make_networks(kind), straight_logs)
    assert [s for s, _ in straight_logs] == [PER_ITERATION * k for k in range(1, 65)]

    first_logs: list = []
    first = train(
        make_networks(kind),
        first_logs,
        total_steps=HALF,
        checkpoint_fn=make_checkpoint_fn(str(tmp_path), config=CONFIG),
    )
    assert entries(tmp_path) == ["step_0000001024"]  # checkpoint_every_steps == HALF
    assert first_logs == straight_logs[:32]

    # Fresh objects: networks initialized from another seed, a template state from another
    # seed (other env states, rng key, sampler key), and a new optimizer.
    template = fresh_state(kind, seed=1)
    assert differs(nnx.state(template.networks), nnx.state(first.training_state.networks))
    assert differs(template.env_states, first.training_state.env_states)
    ckpt = load_checkpoint(step_dir(tmp_path, HALF), template.networks, template.optimizer)
    assert ckpt["step"] == HALF
    assert ckpt["config"] == CONFIG
    restored = ckpt["training_state"]
    assert restored.networks is template.networks
    assert restored.optimizer is template.optimizer
    assert_trees_equal(everything(restored), everything(first.training_state))

    resumed_logs: list = []
    resumed = train(template.networks, resumed_logs, initial_state=restored)
    # Every metric of every resumed iteration, evaluations included, equals the straight
    # run's second half exactly (==, not approximately).
    assert resumed_logs == straight_logs[32:]
    assert any("eval/episode_reward" in m for _, m in resumed_logs)
    assert resumed.total_steps == TOTAL
    # Parameters, normalizer, sampler RNG, Adam moments and counts, env and network states.
    assert_trees_equal(everything(resumed.training_state), everything(straight.training_state))


# --- Layout ---------------------------------------------------------------------------------


def test_checkpoint_layout_follows_the_contract(tmp_path):
    ts = fresh_state("mlp")
    path = save_checkpoint(str(tmp_path / "run"), ts, 96, config=CONFIG)
    assert path == step_dir(tmp_path / "run", 96)
    assert entries(tmp_path / "run") == ["step_0000000096"]  # no temporary left behind
    assert entries(path) == ["metadata.pkl", "networks", "optimizer"]

    # networks/: plain Orbax, every variable except the PRNG key, which metadata.pkl holds.
    with ocp.Checkpointer(ocp.StandardCheckpointHandler()) as checkpointer:
        stored = checkpointer.restore(os.path.join(path, "networks"))
        stored_opt = checkpointer.restore(os.path.join(path, "optimizer"))
    # The composed MLP: Sequential([Normalizer, Flattener, PPOAdapter(action, value)]).
    normalizer, sampler = ts.networks.layers[0], ts.networks.layers[2].action.layers[-1]
    np.testing.assert_array_equal(stored["layers"]["0"]["mean"], np.asarray(normalizer.mean[...]))
    stored_sampler = stored["layers"]["2"]["action"]["layers"]["2"]
    assert set(stored_sampler["rngs"]["default"]) == {"count"}
    assert int(stored_opt["step"]) == 0
    assert {"mu", "nu", "count"} <= set(stored_opt["opt_state"]["0"])

    with open(os.path.join(path, "metadata.pkl"), "rb") as f:
        meta = pickle.load(f)
    assert meta["step"] == 96
    assert meta["config"] == CONFIG
    assert {"network_states", "env_states", "rng_key", "steps_taken"} <= set(meta)
    # What rebuilds the network without a template (nnx_ppo.policy.load): plain data.
    recipe = meta["network_recipe"]
    assert (recipe["kind"], recipe["obs_size"], recipe["action_size"]) == ("mlp", 6, 2)
    assert recipe["fields"]["actor_hidden_sizes"] == [8] and json.loads(json.dumps(recipe))
    assert checkpointing.read_network_recipe(path) == recipe
    ((key_path, impl, data),) = meta["network_rng_keys"]
    assert key_path == ("layers", 2, "action", "layers", 2, "rngs", "default", "key")
    assert impl == "threefry2x32" and data.dtype == np.uint32
    np.testing.assert_array_equal(data, jax.random.key_data(sampler.rngs.default.key[...]))


def test_config_with_flags_round_trips_and_no_config_gives_none(tmp_path):
    config = dataclasses.replace(
        CONFIG,
        ppo=dataclasses.replace(
            CONFIG.ppo,
            logging_level=LoggingLevel.ALL | LoggingLevel.ROLLOUT_OBS,
            logging_percentiles=(5, 95),
        ),
    )
    ts = fresh_state("mlp")
    with_config = save_checkpoint(str(tmp_path), ts, 1, config=config)
    without = save_checkpoint(str(tmp_path), ts, 2)
    template = fresh_state("mlp", seed=3)
    assert load_checkpoint(with_config, template.networks, template.optimizer)["config"] == config
    assert load_checkpoint(without, template.networks, template.optimizer)["config"] is None


def test_make_checkpoint_fn_rejects_a_config_of_the_wrong_type(tmp_path):
    with pytest.raises(ValueError, match="TrainConfig"):
        make_checkpoint_fn(str(tmp_path), config=CONFIG.ppo)


# --- Atomic writes --------------------------------------------------------------------------


def fail(*args: Any) -> None:
    raise RuntimeError("disk full")


def test_failure_mid_write_leaves_no_step_directory(tmp_path, monkeypatch):
    ts = fresh_state("mlp")
    save_checkpoint(str(tmp_path), ts, 32)
    # networks/ and optimizer/ are written before metadata.pkl, so this fails mid-write.
    monkeypatch.setattr(checkpointing, "write_metadata", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        make_checkpoint_fn(str(tmp_path))(ts, 64)
    assert entries(tmp_path) == ["step_0000000032"]  # temporary directory cleaned up too
    monkeypatch.undo()
    template = fresh_state("mlp", seed=5)
    ckpt = load_checkpoint(step_dir(tmp_path, 32), template.networks, template.optimizer)
    assert_trees_equal(everything(ckpt["training_state"]), everything(ts))


def test_overwriting_a_step_is_all_or_nothing(tmp_path, monkeypatch):
    old, new = fresh_state("mlp", seed=0), fresh_state("mlp", seed=1)
    save_checkpoint(str(tmp_path), old, 32)

    monkeypatch.setattr(checkpointing, "write_metadata", fail)
    with pytest.raises(RuntimeError):
        save_checkpoint(str(tmp_path), new, 32)
    monkeypatch.undo()
    assert entries(tmp_path) == ["step_0000000032"]
    template = fresh_state("mlp", seed=2)
    ckpt = load_checkpoint(step_dir(tmp_path, 32), template.networks, template.optimizer)
    assert_trees_equal(everything(ckpt["training_state"]), everything(old))  # the old one

    save_checkpoint(str(tmp_path), new, 32)
    assert entries(tmp_path) == ["step_0000000032"]  # the replaced copy is removed
    ckpt = load_checkpoint(step_dir(tmp_path, 32), template.networks, template.optimizer)
    assert_trees_equal(everything(ckpt["training_state"]), everything(new))


# --- Mismatches and unsafe metadata ---------------------------------------------------------


def test_loading_into_another_architecture_names_the_variable_and_shapes(tmp_path):
    path = save_checkpoint(str(tmp_path), fresh_state("mlp", hidden=8), 32)
    template = fresh_state("mlp", seed=1, hidden=16)
    before = as_numpy((nnx.state(template.networks), nnx.state(template.optimizer)))
    # The first actor layer maps the 6 normalized observations to the hidden units.
    with pytest.raises(ValueError, match=r"action/.*kernel has shape \(6, 8\) float32 in the ch"):
        load_checkpoint(path, template.networks, template.optimizer)
    with pytest.raises(ValueError, match=r"but shape \(6, 16\) float32 in the network"):
        load_checkpoint(path, template.networks, template.optimizer)
    # Nothing was overwritten.
    after = as_numpy((nnx.state(template.networks), nnx.state(template.optimizer)))
    assert_trees_equal(after, before)

    lstm = fresh_state("lstm")
    with pytest.raises(ValueError, match=r"is missing in the (checkpoint|network)"):
        load_checkpoint(path, lstm.networks, lstm.optimizer)


class Payload:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_metadata_is_refused_without_running_it(tmp_path):
    path = save_checkpoint(str(tmp_path / "run"), fresh_state("mlp"), 32)
    marker = tmp_path / "pwned"
    with open(os.path.join(path, "metadata.pkl"), "wb") as f:
        pickle.dump({"format_version": 1, "step": Payload(str(marker))}, f)
    template = fresh_state("mlp", seed=1)
    with pytest.raises(ValueError, match=r"refusing to load global (posix|os)\.system"):
        load_checkpoint(path, template.networks, template.optimizer)
    assert not marker.exists()


def test_state_classes_from_untrusted_modules_are_refused(tmp_path):
    path = save_checkpoint(str(tmp_path), fresh_state("mlp"), 32)
    with open(os.path.join(path, "metadata.pkl"), "rb") as f:
        meta = pickle.load(f)
    # Only plain data, but naming a class outside the trusted modules.
    meta["env_states"] = ("dataclass", "subprocess:Popen", (("args", ("scalar", "true")),))
    with open(os.path.join(path, "metadata.pkl"), "wb") as f:
        pickle.dump(meta, f)
    template = fresh_state("mlp", seed=1)
    with pytest.raises(ValueError, match="subprocess:Popen is not from a trusted module"):
        load_checkpoint(path, template.networks, template.optimizer)


@struct.dataclass
class CustomEnvState:
    """An env state class from outside the trusted modules."""

    position: jax.Array
    label: str = struct.field(pytree_node=False, default="custom")


def test_custom_state_classes_must_be_registered(tmp_path):
    ts = fresh_state("mlp")
    custom = ts.replace(env_states=CustomEnvState(jnp.arange(N_ENVS, dtype=jnp.float32), "x"))
    # Refused when saving, so that no checkpoint is written that could not be loaded.
    with pytest.raises(TypeError, match=r"env_states: state class .*CustomEnvState is not"):
        save_checkpoint(str(tmp_path), custom, 32)
    assert entries(tmp_path) == []

    checkpointing.register_state_class(CustomEnvState)
    path = save_checkpoint(str(tmp_path), custom, 32)
    template = fresh_state("mlp", seed=1)
    restored = load_checkpoint(path, template.networks, template.optimizer)["training_state"]
    assert isinstance(restored.env_states, CustomEnvState)
    assert restored.env_states.label == "x"
    assert_trees_equal(everything(restored), everything(custom))


def test_a_directory_without_a_checkpoint_is_reported(tmp_path):
    template = fresh_state("mlp")
    with pytest.raises(FileNotFoundError, match="networks is missing"):
        load_checkpoint(str(tmp_path), template.networks, template.optimizer)


# --- MuJoCo Playground env states -----------------------------------------------------------


@pytest.mark.slow
def test_playground_env_states_round_trip(tmp_path):
    env = envs.load("CartpoleBalance")

    def state(seed: int) -> TrainingState:
        networks = make_mlp_actor_critic(
            env.observation_size,
            env.action_size,
            rngs=nnx.Rngs(seed),
            actor_hidden_sizes=(4,),
            critic_hidden_sizes=(4,),
        )
        return new_training_state(env, networks, 2, seed)

    ts = state(0)
    path = save_checkpoint(str(tmp_path), ts, 0)
    template = state(1)
    restored = load_checkpoint(path, template.networks, template.optimizer)["training_state"]
    # Same pytree structure (mjx.Data and its static numpy fields included) and same leaves.
    assert jax.tree.structure(restored.env_states) == jax.tree.structure(ts.env_states)
    assert type(restored.env_states.data) is type(ts.env_states.data)
    assert_trees_equal(everything(restored), everything(ts))
