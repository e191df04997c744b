"""Checkpoints written when ``make_mlp_actor_critic`` built a ``PPONetwork`` load into the
composed network it builds now: for resume, as a distillation teacher, for a policy and its
export. Each test writes a checkpoint with the old layout (``legacy.ppo_network_mlp_actor_
critic``, the old build) and loads it into the new one: equal parameters, statistics and
random state, equal actions, and a resumed run whose losses equal the old network's."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
import optax
import pytest
from flax import nnx

from nnx_ppo import envs, policy
from nnx_ppo.algorithms import checkpointing, teacher
from nnx_ppo.algorithms.config import EvalConfig, PPOConfig, TrainConfig
from nnx_ppo.algorithms.step import new_training_state
from nnx_ppo.algorithms.training import train_ppo
from nnx_ppo.algorithms.types import TrainingState
from nnx_ppo.networks import factories, legacy
from nnx_ppo.networks.actor_critic import PPONetwork
from nnx_ppo.networks.containers import Sequential
from nnx_ppo.networks.normalizer import NormalizerStatistics

ENV = envs.load("PointReach", {"episode_length": 20})
N_ENVS, ROLLOUT = 8, 4
TWO_ITERATIONS = 2 * N_ENVS * ROLLOUT
SIZES = {"actor_hidden_sizes": (8,), "critic_hidden_sizes": (8,)}
CONFIG = TrainConfig(
    ppo=PPOConfig(
        n_envs=N_ENVS, rollout_length=ROLLOUT, total_steps=TWO_ITERATIONS, n_minibatches=2
    ),
    eval=EvalConfig(enabled=False),
    checkpoint_every_steps=TWO_ITERATIONS,
    seed=5,
)


def networks(old: bool, seed: int = 0, obs_size: Any = None, **kw: Any) -> Any:
    build = legacy.ppo_network_mlp_actor_critic if old else factories.make_mlp_actor_critic
    size = ENV.observation_size if obs_size is None else obs_size
    return build(size, ENV.action_size, rngs=nnx.Rngs(seed), **SIZES, **kw)


def trained_old_checkpoint(tmp_path) -> tuple[str, Any]:
    """A checkpoint of an old PPONetwork after two PPO iterations (statistics updated,
    sampler RNG advanced, Adam moments nonzero), and the final training state."""
    net = networks(old=True)
    assert isinstance(net, PPONetwork)
    result = train_ppo(
        ENV, net, CONFIG, checkpoint_fn=checkpointing.make_checkpoint_fn(str(tmp_path / "old"))
    )
    path = policy.find_checkpoint(tmp_path / "old")
    return path, result


def by_new_path(module: Any, renames: Any = None) -> dict[tuple, np.ndarray]:
    """Every variable of ``module`` (keys as raw data), by its path in the new layout."""
    out = {}
    for path, variable in nnx.to_flat_state(nnx.state(module)):
        value = variable.get_value()
        if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
            value = jax.random.key_data(value)
        new = path if renames is None else legacy.rename_path(tuple(path), renames, to_old=False)
        out[tuple(map(str, new))] = np.asarray(value)
    return out


def assert_same_variables(old: Any, new: Any) -> None:
    renames = legacy.legacy_renames(new)
    expected, got = by_new_path(old, renames), by_new_path(new)
    assert set(expected) == set(got)
    for path, value in expected.items():
        np.testing.assert_array_equal(got[path], value, err_msg="/".join(path))


def obs(batch: int = 5) -> jax.Array:
    return jax.random.uniform(jax.random.key(3), (batch, ENV.observation_size), minval=-1)


def test_the_renames_cover_every_variable_of_each_variant() -> None:
    # One per option that changes the layout: no normalizer, reward streams, obs keys.
    dict_obs = {"state": (3,), "privileged_state": (4,)}
    keys = {"policy_obs_key": "state", "value_obs_key": "privileged_state"}
    for obs_size, kw in [
        (None, {}),
        (None, {"normalize_obs": False}),
        (None, {"reward_streams": ("a", "b")}),
        (dict_obs, keys),
        (dict_obs, {**keys, "normalize_obs": False}),
    ]:
        old, new = networks(True, 1, obs_size, **kw), networks(False, 1, obs_size, **kw)
        assert isinstance(new, Sequential)
        assert_same_variables(old, new)


def test_an_old_checkpoint_resumes_into_the_composed_network(tmp_path) -> None:
    path, _ = trained_old_checkpoint(tmp_path)
    loaded = {}
    for old in (True, False):
        template = new_training_state(ENV, networks(old, seed=9), N_ENVS, 0)
        ckpt = checkpointing.load_checkpoint(path, template.networks, template.optimizer)
        loaded[old] = ckpt["training_state"]
    # Equal parameters, statistics, sampler RNG, and Adam moments (by their new paths).
    assert_same_variables(loaded[True].networks, loaded[False].networks)
    renames = legacy.legacy_renames(loaded[False].networks)
    opt_old = by_new_path(loaded[True].optimizer, renames)
    opt_new = by_new_path(loaded[False].optimizer)
    assert set(opt_old) == set(opt_new)
    for key, value in opt_old.items():
        np.testing.assert_array_equal(opt_new[key], value)
    stats = nnx.state(loaded[False].networks, NormalizerStatistics)
    assert float(jax.tree.leaves(stats)[0]) == TWO_ITERATIONS  # count: two updates
    assert checkpointing.checkpoint_misfits(path, loaded[False].networks, N_ENVS) == {}

    # Resuming: the same losses as the old network resumed from the same checkpoint.
    def losses(state: Any) -> list[dict[str, float]]:
        logged: list[dict[str, float]] = []
        log = lambda m, _s: logged.append({k: float(v) for k, v in m.items() if "loss" in k})  # noqa: E731
        ppo = dataclasses.replace(CONFIG.ppo, total_steps=2 * TWO_ITERATIONS)
        config = dataclasses.replace(CONFIG, ppo=ppo)
        train_ppo(ENV, state.networks, config, log_fn=log, initial_state=state)
        return logged

    old_losses, new_losses = losses(loaded[True]), losses(loaded[False])
    assert old_losses and old_losses[0]
    assert new_losses == old_losses


def test_an_old_checkpoint_is_a_teacher_and_a_policy_that_exports(tmp_path) -> None:
    path, result = trained_old_checkpoint(tmp_path)
    trained = result.training_state.networks
    spec = {"kind": "mlp", **SIZES}
    teacher_net = teacher.load_teacher(path, spec, ENV.observation_size, ENV.action_size)
    assert isinstance(teacher_net, Sequential)
    old_teacher = networks(old=True, seed=4)
    checkpointing.load_networks(path, old_teacher)
    old_teacher.eval()
    assert_same_variables(old_teacher, teacher_net)
    out_new = teacher_net(teacher_net.initialize_state(5), obs()).output
    out_old = old_teacher(old_teacher.initialize_state(5), obs()).output
    for field in ("actions", "loglikelihoods", "value_estimates"):
        np.testing.assert_array_equal(getattr(out_new, field), getattr(out_old, field))

    # policy.load rebuilds the composed network from the recorded recipe.
    loaded = policy.load(path)
    assert isinstance(loaded.network, Sequential)
    reference = policy.Policy(trained)
    assert loaded.obs_shapes == reference.obs_shapes == (ENV.observation_size,)
    np.testing.assert_array_equal(loaded.act((), obs())[1], reference.act((), obs())[1])
    program = jax.export.deserialize(bytearray(policy.exporting.to_stablehlo(loaded)))
    np.testing.assert_allclose(program.call(obs())[0], reference.act((), obs())[1], atol=1e-6)


@pytest.mark.parametrize("normalize_obs", [True, False])
def test_an_old_asymmetric_checkpoint_loads_as_a_policy_of_its_key(tmp_path, normalize_obs):
    sizes = {"state": (3,), "privileged_state": (2, 2)}
    keys = {"policy_obs_key": "state", "value_obs_key": "privileged_state"}
    old = networks(True, 2, sizes, normalize_obs=normalize_obs, **keys)
    rng = np.random.default_rng(0)
    batch = {k: rng.standard_normal((16, *s)).astype(np.float32) * 3 + 1 for k, s in sizes.items()}
    old.update_statistics(batch)
    old_state = TrainingState(
        networks=old,
        network_states=old.initialize_state(N_ENVS),
        env_states=(),
        optimizer=nnx.Optimizer(old, optax.adam(1e-3), wrt=nnx.Param),
        rng_key=jax.random.key(0),
        steps_taken=np.int32(7),
    )
    path = checkpointing.save_checkpoint(str(tmp_path), old_state, 7)

    loaded = policy.load(path)
    reference = policy.Policy(old)
    assert loaded.obs_shapes == reference.obs_shapes == (3,)
    np.testing.assert_array_equal(
        loaded.act((), batch)[1], reference.act((), batch)[1]
    )  # from the whole observation
    np.testing.assert_array_equal(
        loaded.act((), batch["state"])[1], reference.act((), batch["state"])[1]
    )  # from the policy's key alone
