"""Policy distillation: the teacher stays fixed, states reset per episode, the loss, learning.

Compile time dominates the fast tests, so they share one tiny configuration: PointReach with
20-step episodes, 8 envs, 4-step rollouts, 8-unit MLPs. The teacher is trained with the
configuration of ``test_checkpointing`` (the same compiled PPO chunk, served by the
persistent compilation cache); every distillation run runs the same chunk (a scan of
``MAX_ITERATIONS_PER_CALL`` iterations, whatever its total), so one compilation serves them all.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import config as C
from nnx_ppo.algorithms.checkpointing import make_checkpoint_fn
from nnx_ppo.algorithms.distillation import (
    eval_copy,
    make_distillation_checkpoint_fn,
    new_distillation_state,
    train_distillation,
    unroll_distillation,
)
from nnx_ppo.algorithms.distillation_losses import distillation_loss, gaussian_kl, replay_student
from nnx_ppo.algorithms.ppo import train_ppo
from nnx_ppo.algorithms.teacher import load_teacher
from nnx_ppo.algorithms.training import MAX_ITERATIONS_PER_CALL
from nnx_ppo.networks.base import StatefulModule, zero_loss
from nnx_ppo.networks.types import PPONetworkOutput, StatefulOutput
from nnx_ppo.presets import make_networks
from tests.algorithms.scripted import RandomLengthEnv, expected_counts

ENV = envs.load("PointReach", {"episode_length": 20})
OBS, ACT = ENV.observation_size, ENV.action_size
N_ENVS, ROLLOUT = 8, 4
PER_ITERATION = N_ENVS * ROLLOUT  # 32 env steps per iteration
SPEC = {"kind": "mlp", "actor_hidden_sizes": (8,), "critic_hidden_sizes": (8,)}
LSTM_SPEC = {**SPEC, "kind": "lstm", "lstm_size": 8}
TEACHER_TOTAL = 2 * MAX_ITERATIONS_PER_CALL * PER_ITERATION  # 2048, checkpoints at 1024, 2048
TEACHER_CONFIG = C.TrainConfig(  # test_checkpointing's CONFIG
    ppo=C.PPOConfig(
        n_envs=N_ENVS,
        rollout_length=ROLLOUT,
        total_steps=TEACHER_TOTAL,
        n_epochs=1,
        n_minibatches=2,
    ),
    eval=C.EvalConfig(every_steps=512, n_envs=4, max_episode_length=20),
    checkpoint_every_steps=TEACHER_TOTAL // 2,
    seed=17,
)
TOTAL = MAX_ITERATIONS_PER_CALL * PER_ITERATION  # 1024: 32 iterations, one full chunk
CONFIG = C.DistillationTrainConfig(
    distillation=C.DistillationConfig(
        n_envs=N_ENVS,
        rollout_length=ROLLOUT,
        total_steps=TOTAL,
        learning_rate=1e-3,
        n_epochs=1,
        n_minibatches=2,
    ),
    eval=C.EvalConfig(every_steps=512, n_envs=4, max_episode_length=20),
    checkpoint_every_steps=TOTAL,
    seed=3,
)


def as_numpy(tree: Any) -> Any:
    """Leaves as numpy arrays; PRNG keys as their raw key data."""

    def leaf(x: Any) -> np.ndarray:
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            return np.asarray(jax.random.key_data(x))
        return np.asarray(x)

    return jax.tree.map(leaf, tree)


def assert_trees_equal(actual: Any, expected: Any) -> None:
    assert jax.tree.structure(actual) == jax.tree.structure(expected)
    for a, b in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        np.testing.assert_array_equal(a, b)


def deterministic_actions(network: nnx.Module, obs: jax.Array) -> np.ndarray:
    copy = eval_copy(network)
    return np.asarray(copy(copy.initialize_state(obs.shape[0]), obs).output.actions)


@pytest.fixture(scope="module")
def teacher_run(tmp_path_factory) -> tuple[nnx.Module, str]:
    """A PPO-trained teacher (in memory) and the directory of its checkpoints."""
    directory = str(tmp_path_factory.mktemp("teacher"))
    teacher = make_networks(SPEC, OBS, ACT, seed=0)
    train_ppo(ENV, teacher, TEACHER_CONFIG, checkpoint_fn=make_checkpoint_fn(directory))
    return teacher, directory


@dataclasses.dataclass
class Distilled:
    teacher: nnx.Module
    teacher_before: Any
    student: nnx.Module
    student_before: Any
    result: C.DistillationTrainResult
    logs: list[tuple[int, dict[str, float]]]
    checkpoints: str


@pytest.fixture(scope="module")
def distilled(teacher_run, tmp_path_factory) -> Distilled:
    """One ``train_distillation`` run of CONFIG from the trained teacher."""
    teacher, _ = teacher_run
    teacher_before = as_numpy(nnx.state(teacher))
    student = make_networks(SPEC, OBS, ACT, seed=1)
    student_before = as_numpy(nnx.state(student, nnx.Param))
    logs: list[tuple[int, dict[str, float]]] = []
    directory = str(tmp_path_factory.mktemp("student"))
    result = train_distillation(
        ENV,
        student,
        teacher,
        CONFIG,
        log_fn=lambda metrics, step: logs.append((step, metrics)),
        checkpoint_fn=make_distillation_checkpoint_fn(directory),
    )
    return Distilled(teacher, teacher_before, student, student_before, result, logs, directory)


# --- The teacher is fixed and deterministic ------------------------------------------------


def test_teacher_is_never_updated(distilled):
    # Every teacher variable (parameters, normalizer statistics, sampler key and counter) is
    # bit-identical after training, and the caller's teacher was not switched to eval mode.
    assert_trees_equal(as_numpy(nnx.state(distilled.teacher)), distilled.teacher_before)
    assert distilled.teacher.layers[-1].action.layers[-1].deterministic is False
    # Meanwhile the student's policy trained; its value head, which the loss ignores, did not.
    # (The composed MLP: Sequential([Normalizer, Flattener, PPOAdapter(action, value)]).)
    after = as_numpy(nnx.state(distilled.student, nnx.Param))["layers"][2]
    before = distilled.student_before["layers"][2]
    actor_after, actor_before = jax.tree.leaves(after["action"]), jax.tree.leaves(before["action"])
    assert actor_after
    for a, b in zip(actor_after, actor_before, strict=True):
        assert not np.array_equal(a, b)
    assert_trees_equal(after["value"], before["value"])
    # The student's normalizer saw every rollout observation.
    assert float(distilled.student.layers[0].count[...]) == TOTAL


def test_teacher_targets_are_its_deterministic_outputs(teacher_run):
    teacher, _ = teacher_run
    student = make_networks(SPEC, OBS, ACT, seed=1)
    state = new_distillation_state(ENV, student, teacher, N_ENVS, seed=0)
    eval_teacher = eval_copy(teacher)
    _, _, _, data = unroll_distillation(
        ENV,
        state.env_states,
        student,
        state.student_states,
        eval_teacher,
        state.teacher_states,
        6,
        jax.random.key(1),
    )
    target = data.teacher_rollout_extras
    # The teacher's action is its mean action, tanh(loc): no sampling.
    np.testing.assert_allclose(target["actions"], np.tanh(target["loc"]), atol=1e-6)
    # The same teacher called again on the recorded observations gives the same targets.
    again = eval_teacher(eval_teacher.initialize_state(6 * N_ENVS), data.obs.reshape(-1, OBS))
    for name in ("loc", "scale"):
        np.testing.assert_allclose(
            target[name].reshape(-1, ACT), again.output.distribution_params[name], atol=1e-6
        )
    # The student, in contrast, samples: its actions are not its mean actions.
    student_mean = np.tanh(data.student_output.distribution_params["loc"])
    assert np.abs(np.asarray(data.student_output.actions) - student_mean).mean() > 0.05


# --- Recurrent state resets ----------------------------------------------------------------


class Counter(StatefulModule):
    """Stateful: its action mean is the number of steps seen since its state was reset."""

    def initialize_state(self, batch_size: int) -> jax.Array:
        return jnp.zeros((batch_size,), jnp.float32)

    def __call__(self, state: jax.Array, obs: Any, rollout_extras: Any = None) -> StatefulOutput:
        count = state + 1.0
        zeros = jnp.zeros((count.shape[0], 1), jnp.float32)
        out = PPONetworkOutput(
            actions=zeros,
            raw_actions=zeros,
            loglikelihoods=zeros[:, 0],
            value_estimates=count,
            regularization_loss=zero_loss(),
            metrics={},
            distribution_params={"loc": count[:, None], "scale": jnp.ones_like(zeros)},
        )
        return StatefulOutput(count, out, zero_loss(), {}, zeros)


def test_teacher_and_student_states_reset_where_episodes_end():
    env = RandomLengthEnv()  # episodes of 2 to 5 steps
    n_envs, n_steps = 6, 15
    env_state = jax.vmap(env.reset)(jax.random.split(jax.random.key(3), n_envs))
    student_start = np.array([0, 3, 0, 7, 1, 0], np.float32)  # mid-episode states carried in
    teacher_start = np.array([2, 0, 5, 0, 0, 1], np.float32)
    student = Counter()
    _, student_end, teacher_end, data = unroll_distillation(
        env,
        env_state,
        student,
        jnp.asarray(student_start),
        eval_copy(Counter()),
        jnp.asarray(teacher_start),
        n_steps,
        jax.random.key(4),
    )
    done = np.asarray(data.done)
    assert done.sum() >= n_envs, "every env should finish an episode in 15 steps"
    assert len({tuple(np.flatnonzero(done[:, b])) for b in range(n_envs)}) > 1

    student_counts = expected_counts(done, student_start)
    teacher_counts = expected_counts(done, teacher_start)
    recorded_student = data.student_output.distribution_params["loc"][..., 0]
    np.testing.assert_array_equal(recorded_student, student_counts)
    np.testing.assert_array_equal(data.teacher_rollout_extras["loc"][..., 0], teacher_counts)
    # The carried states also restart after a final-step termination.
    np.testing.assert_array_equal(student_end, np.where(done[-1], 0.0, student_counts[-1]))
    np.testing.assert_array_equal(teacher_end, np.where(done[-1], 0.0, teacher_counts[-1]))

    # The loss replays the student with the same resets.
    replay = replay_student(student, jnp.asarray(student_start), data)
    np.testing.assert_array_equal(replay.loc[..., 0], student_counts)
    # Unit scales, so the KL is half the squared count difference, summed over 1 action dim.
    loss, _ = distillation_loss(student, jnp.asarray(student_start), data)
    expected = np.mean(0.5 * np.square(teacher_counts - student_counts))
    np.testing.assert_allclose(loss, expected, rtol=1e-6)
    assert expected > 0.5


# --- The loss -------------------------------------------------------------------------------


def test_gaussian_kl_worked_example():
    # 1-D: KL(N(0, 1) || N(1, 2)) = log(2 / 1) + (1^2 + (0 - 1)^2) / (2 * 2^2) - 1/2
    #                              = 0.693147 + 0.25 - 0.5 = 0.443147.
    # A second dimension with equal distributions adds 0.
    kl = gaussian_kl(
        jnp.array([[0.0, 3.0]]),
        jnp.array([[1.0, 0.5]]),
        jnp.array([[1.0, 3.0]]),
        jnp.array([[2.0, 0.5]]),
    )
    np.testing.assert_allclose(kl, [math.log(2.0) - 0.25], rtol=1e-6)


@pytest.mark.parametrize("spec", [SPEC, LSTM_SPEC], ids=["mlp", "lstm"])
def test_loss_is_zero_for_the_same_weights_and_not_differentiated_by_teacher(spec):
    teacher = make_networks(spec, OBS, ACT, seed=0)
    twin = make_networks(spec, OBS, ACT, seed=0)
    other = make_networks(spec, OBS, ACT, seed=0)
    params = nnx.state(other, nnx.Param)
    keys = iter(jax.random.split(jax.random.key(9), len(jax.tree.leaves(params))))
    nnx.update(
        other, jax.tree.map(lambda p: p + 0.3 * jax.random.normal(next(keys), p.shape), params)
    )
    state = new_distillation_state(ENV, twin, teacher, N_ENVS, seed=0)
    start = state.student_states
    _, _, _, data = unroll_distillation(
        ENV,
        state.env_states,
        twin,
        start,
        eval_copy(teacher),
        state.teacher_states,
        6,
        jax.random.key(2),
    )
    same, _ = distillation_loss(twin, start, data)
    different, _ = distillation_loss(other, start, data)
    assert float(same) == pytest.approx(0.0, abs=1e-7)
    assert float(different) > 1e-2

    # No gradient flows into the teacher's targets; the student's parameters get one.
    def loss_of(targets: Any, params: Any) -> jax.Array:
        graphdef, _, rest = nnx.split(other, nnx.Param, ...)
        student = nnx.merge(graphdef, params, rest)
        return distillation_loss(student, start, data.replace(teacher_rollout_extras=targets))[0]

    target_grads, param_grads = jax.grad(loss_of, argnums=(0, 1))(
        data.teacher_rollout_extras, nnx.state(other, nnx.Param)
    )
    for leaf in jax.tree.leaves(target_grads):
        np.testing.assert_array_equal(leaf, 0.0)
    assert float(sum(jnp.sum(jnp.abs(g)) for g in jax.tree.leaves(param_grads))) > 0.0


# --- The host loop --------------------------------------------------------------------------


def test_log_fn_eval_and_checkpoint_schedule(distilled):
    steps = [s for s, _ in distilled.logs]
    assert steps == [PER_ITERATION * k for k in range(1, 33)]
    losses = [m["losses/distillation"] for _, m in distilled.logs]
    assert all(math.isfinite(x) and x >= 0 for x in losses)
    assert [e["step"] for e in distilled.result.eval_history] == [512, TOTAL]
    evaluated = [s for s, m in distilled.logs if "eval/episode_reward" in m]
    assert evaluated == [512, TOTAL]
    assert distilled.result.total_steps == TOTAL
    assert distilled.result.total_iterations == 32
    assert int(distilled.result.training_state.steps_taken) == TOTAL
    assert distilled.result.training_state.student is distilled.student
    # The student's checkpoint loads like any PPO policy and acts like the student.
    assert sorted(os.listdir(distilled.checkpoints)) == [f"step_{TOTAL:010d}"]
    loaded = load_teacher(distilled.checkpoints, SPEC, OBS, ACT)
    obs = jax.random.normal(jax.random.key(5), (16, OBS))
    np.testing.assert_array_equal(
        deterministic_actions(loaded, obs), deterministic_actions(distilled.student, obs)
    )


def test_invalid_arguments_fail_before_compiling(teacher_run):
    teacher, _ = teacher_run
    student = make_networks(SPEC, OBS, ACT, seed=1)
    with pytest.raises(ValueError, match="config must be a DistillationTrainConfig"):
        train_distillation(ENV, student, teacher, TEACHER_CONFIG)
    with pytest.raises(ValueError, match=r"distillation\.total_steps must be a positive"):
        train_distillation(ENV, student, teacher, CONFIG, total_steps=0)
    with pytest.raises(ValueError, match="teacher and student must be different"):
        train_distillation(ENV, student, student, CONFIG)
    wide = make_networks(SPEC, OBS, ACT + 1, seed=0)
    with pytest.raises(ValueError, match=r"teacher action distribution has shape \(1, 3\)"):
        train_distillation(ENV, student, wide, CONFIG)
    state = new_distillation_state(ENV, student, teacher, 2 * N_ENVS, seed=0)
    with pytest.raises(ValueError, match=r"holds 16 envs but config\.distillation\.n_envs is 8"):
        train_distillation(ENV, student, teacher, CONFIG, initial_state=state)
    state = new_distillation_state(ENV, student, teacher, N_ENVS, seed=0)
    lstm_teacher = make_networks(LSTM_SPEC, OBS, ACT, seed=0)
    with pytest.raises(ValueError, match=r"teacher_states .* do not match the teacher's"):
        train_distillation(ENV, student, lstm_teacher, CONFIG, initial_state=state)


# --- Loading a teacher ----------------------------------------------------------------------


def test_teacher_loaded_from_a_checkpoint_acts_like_the_in_memory_teacher(teacher_run):
    teacher, directory = teacher_run
    assert sorted(os.listdir(directory)) == ["step_0000001024", "step_0000002048"]
    obs = jax.random.normal(jax.random.key(6), (32, OBS))
    expected = deterministic_actions(teacher, obs)
    # A run directory loads its newest checkpoint; a step directory loads that step.
    for path in (directory, os.path.join(directory, "step_0000002048")):
        loaded = load_teacher(path, SPEC, OBS, ACT)
        assert loaded.layers[-1].action.layers[-1].deterministic is True  # in eval mode
        out = loaded(loaded.initialize_state(32), obs).output
        np.testing.assert_array_equal(out.actions, expected)
    earlier = load_teacher(os.path.join(directory, "step_0000001024"), SPEC, OBS, ACT)
    assert not np.array_equal(deterministic_actions(earlier, obs), expected)


def test_load_teacher_reports_missing_and_incompatible_checkpoints(teacher_run, tmp_path):
    _, directory = teacher_run
    with pytest.raises(ValueError, match="neither a checkpoint directory"):
        load_teacher(str(tmp_path / "nowhere"), SPEC, OBS, ACT)
    wider = {**SPEC, "actor_hidden_sizes": (16,)}
    with pytest.raises(ValueError, match=r"kernel has shape \(6, 8\) float32 in the checkpoint"):
        load_teacher(directory, wider, OBS, ACT)
    with pytest.raises(ValueError, match="cannot load a network of spec"):
        load_teacher(directory, LSTM_SPEC, OBS, ACT)
    with pytest.raises(ValueError, match="cannot be built"):
        load_teacher(directory, {**SPEC, "hidden": 3}, OBS, ACT)


# --- Learning (slow) ------------------------------------------------------------------------


def learning_run(
    env_name, overrides, spec, obs_size, action_size, ppo, distill, eval_length, tmp_path
):
    """Trains a teacher with PPO (checkpointed), loads it back, distills a fresh student.

    Returns:
        ``(teacher_reward, student_reward)``: final deterministic eval rewards.
    """
    env = envs.load(env_name, overrides)
    eval_cfg = C.EvalConfig(every_steps=10**9, n_envs=128, max_episode_length=eval_length)
    teacher = make_networks(spec, obs_size, action_size, seed=0)
    teacher_config = C.TrainConfig(ppo=ppo, eval=eval_cfg, seed=0, checkpoint_every_steps=10**9)
    trained = train_ppo(env, teacher, teacher_config, checkpoint_fn=make_checkpoint_fn(tmp_path))
    teacher_reward = trained.eval_history[-1]["eval/episode_reward"]
    loaded = load_teacher(str(tmp_path), spec, obs_size, action_size)
    student = make_networks(spec, obs_size, action_size, seed=1)
    config = C.DistillationTrainConfig(distillation=distill, eval=eval_cfg, seed=0)
    result = train_distillation(env, student, loaded, config)
    return teacher_reward, result.eval_history[-1]["eval/episode_reward"]


@pytest.mark.slow
def test_mlp_student_matches_a_ppo_teacher_on_point_reach(tmp_path):
    spec = {"kind": "mlp", "actor_hidden_sizes": (32, 32), "critic_hidden_sizes": (32, 32)}
    teacher_reward, student_reward = learning_run(
        "PointReach",
        None,
        spec,
        6,
        2,
        C.PPOConfig(n_envs=64, rollout_length=20, total_steps=150_000, learning_rate=1e-3),
        C.DistillationConfig(n_envs=64, rollout_length=20, total_steps=64_000, learning_rate=3e-3),
        100,
        tmp_path,
    )
    # The teacher scores about 88 of 100 (random policy: about 8).
    assert teacher_reward > 70.0
    assert student_reward >= 0.9 * teacher_reward


@pytest.mark.slow
def test_lstm_student_matches_an_lstm_teacher_on_memory_cue(tmp_path):
    spec = {
        "kind": "lstm",
        "lstm_size": 32,
        "actor_hidden_sizes": (32,),
        "critic_hidden_sizes": (32,),
    }
    teacher_reward, student_reward = learning_run(
        "MemoryCue",
        {"delay": 3},
        spec,
        2,
        1,
        C.PPOConfig(n_envs=128, rollout_length=10, total_steps=150_000, learning_rate=3e-3),
        C.DistillationConfig(n_envs=128, rollout_length=10, total_steps=32_000, learning_rate=3e-3),
        10,
        tmp_path,
    )
    # Remembering the cue gives 1; a memoryless student would get about 0.5.
    assert teacher_reward >= 0.95
    assert student_reward >= 0.9 * teacher_reward
