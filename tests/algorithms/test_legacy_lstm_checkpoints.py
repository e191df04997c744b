"""Checkpoints written when ``make_lstm_actor_critic`` built a ``PPONetwork`` load into the
composed network it builds now (``legacy.legacy_renames`` for the variables,
``legacy.legacy_carry`` for the LSTM carries): for resume with the old network's losses, as
a distillation teacher, for a policy and its export. As ``test_legacy_checkpoints`` does for
the MLP, each test writes the checkpoint with the old build
(``legacy.ppo_network_lstm_actor_critic``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
from flax import nnx

from nnx_ppo import envs, policy
from nnx_ppo.algorithms import checkpointing, teacher
from nnx_ppo.algorithms.config import EvalConfig, PPOConfig, TrainConfig
from nnx_ppo.algorithms.step import new_training_state
from nnx_ppo.algorithms.training import train_ppo
from nnx_ppo.networks import factories, legacy
from nnx_ppo.networks.actor_critic import PPONetwork
from nnx_ppo.networks.containers import Sequential
from tests.algorithms.test_legacy_checkpoints import by_new_path

ENV = envs.load("MemoryCue", {})
N_ENVS, ROLLOUT = 8, 4
TWO_ITERATIONS = 2 * N_ENVS * ROLLOUT
SIZES = {"lstm_size": 8, "actor_hidden_sizes": (8,), "critic_hidden_sizes": (8,)}
CONFIG = TrainConfig(
    ppo=PPOConfig(
        n_envs=N_ENVS, rollout_length=ROLLOUT, total_steps=TWO_ITERATIONS, n_minibatches=2
    ),
    eval=EvalConfig(enabled=False),
    checkpoint_every_steps=TWO_ITERATIONS,
    seed=5,
)


def networks(old: bool, seed: int = 0) -> Any:
    build = legacy.ppo_network_lstm_actor_critic if old else factories.make_lstm_actor_critic
    return build(ENV.observation_size, ENV.action_size, rngs=nnx.Rngs(seed), **SIZES)


def assert_same_variables(old: Any, new: Any) -> None:
    expected, got = by_new_path(old, legacy.legacy_renames(new)), by_new_path(new)
    assert set(expected) == set(got)
    for path, value in expected.items():
        np.testing.assert_array_equal(got[path], value, err_msg="/".join(path))


def trained_old_checkpoint(tmp_path) -> tuple[str, Any]:
    """A checkpoint of an old LSTM PPONetwork after two PPO iterations (mid-episode: its
    carries are not zero), and the final training state."""
    net = networks(old=True)
    assert isinstance(net, PPONetwork)
    result = train_ppo(
        ENV, net, CONFIG, checkpoint_fn=checkpointing.make_checkpoint_fn(str(tmp_path / "old"))
    )
    return policy.find_checkpoint(tmp_path / "old"), result


def test_an_old_lstm_checkpoint_resumes_into_the_composed_network(tmp_path) -> None:
    path, _ = trained_old_checkpoint(tmp_path)
    loaded = {}
    for old in (True, False):
        template = new_training_state(ENV, networks(old, seed=9), N_ENVS, 0)
        ckpt = checkpointing.load_checkpoint(path, template.networks, template.optimizer)
        loaded[old] = ckpt["training_state"]
    assert_same_variables(loaded[True].networks, loaded[False].networks)
    renames = legacy.legacy_renames(loaded[False].networks)
    opt_old, opt_new = (
        by_new_path(loaded[True].optimizer, renames),
        by_new_path(loaded[False].optimizer),
    )
    assert set(opt_old) == set(opt_new)
    for key, value in opt_old.items():
        np.testing.assert_array_equal(opt_new[key], value)
    # The carries: each side's (h, c) is its port's LSTM (c, h), mid-episode (nonzero).
    old_carry, new_carry = loaded[True].network_states, loaded[False].network_states
    (h, c), _ = old_carry["actor"]
    assert not np.allclose(h, 0)
    np.testing.assert_array_equal(new_carry[-1]["action"][0][0], c)
    np.testing.assert_array_equal(new_carry[-1]["action"][0][1], h)
    np.testing.assert_array_equal(new_carry[-1]["value"][0][1], old_carry["critic"][0][0])
    assert checkpointing.checkpoint_misfits(path, loaded[False].networks, N_ENVS) == {}

    def losses(state: Any) -> list[dict[str, float]]:
        logged: list[dict[str, float]] = []
        log = lambda m, _s: logged.append({k: float(v) for k, v in m.items() if "loss" in k})  # noqa: E731
        ppo = dataclasses.replace(CONFIG.ppo, total_steps=2 * TWO_ITERATIONS)
        train_ppo(
            ENV,
            state.networks,
            dataclasses.replace(CONFIG, ppo=ppo),
            log_fn=log,
            initial_state=state,
        )
        return logged

    old_losses, new_losses = losses(loaded[True]), losses(loaded[False])
    assert old_losses and old_losses[0]
    assert new_losses == old_losses


def test_an_old_lstm_checkpoint_is_a_teacher_and_a_policy_that_exports(tmp_path) -> None:
    path, result = trained_old_checkpoint(tmp_path)
    trained = result.training_state.networks
    spec = {"kind": "lstm", **SIZES}
    teacher_net = teacher.load_teacher(path, spec, ENV.observation_size, ENV.action_size)
    assert isinstance(teacher_net, Sequential)
    old_teacher = networks(old=True, seed=4)
    checkpointing.load_networks(path, old_teacher)
    old_teacher.eval()
    assert_same_variables(old_teacher, teacher_net)
    obs = jax.random.uniform(jax.random.key(3), (3, 5, ENV.observation_size), minval=-1)
    new_s, old_s = teacher_net.initialize_state(5), old_teacher.initialize_state(5)
    for t in range(3):  # the carries matter: several steps
        out_new, out_old = teacher_net(new_s, obs[t]), old_teacher(old_s, obs[t])
        for field in ("actions", "loglikelihoods", "value_estimates"):
            np.testing.assert_array_equal(
                getattr(out_new.output, field), getattr(out_old.output, field)
            )
        new_s, old_s = out_new.next_state, out_old.next_state

    # policy.load rebuilds the composed network from the recorded recipe; its state is the
    # policy LSTM's (c, h) where the old policy's was (h, c).
    loaded = policy.load(path)
    assert isinstance(loaded.network, Sequential)
    reference = policy.Policy(trained)
    state_new, state_old = loaded.initial_state(5), reference.initial_state(5)
    assert [x.shape for x in jax.tree.leaves(state_new)] == [(5, 8), (5, 8)]
    program = jax.export.deserialize(bytearray(policy.exporting.to_stablehlo(loaded)))
    exported = jax.tree.leaves(state_new)
    for t in range(3):
        state_new, action_new = loaded.act(state_new, obs[t])
        state_old, action_old = reference.act(state_old, obs[t])
        np.testing.assert_array_equal(action_new, action_old)
        action_hlo, *exported = program.call(obs[t], *exported)
        np.testing.assert_allclose(action_hlo, action_old, atol=1e-6)
    (h, c) = jax.tree.leaves(state_old)
    np.testing.assert_array_equal(jax.tree.leaves(state_new), [c, h])
