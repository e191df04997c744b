"""The ``train_ppo`` host loop: logging, overrides, eval and checkpoint schedules, resuming.

Compile time dominates here, so every run uses one tiny configuration (``CONFIG``) and
varies only what does not change the compiled functions (total steps, seed, schedules): the
jitted chunk always scans ``MAX_ITERATIONS_PER_CALL`` iterations, whatever the total, so one
compilation serves every run.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms.config import EvalConfig, PPOConfig, TrainConfig, TrainResult
from nnx_ppo.algorithms.program_cache import ProgramCache
from nnx_ppo.algorithms.step import new_training_state
from nnx_ppo.algorithms.training import NonFiniteError, train_ppo
from nnx_ppo.algorithms.types import TrainingState
from nnx_ppo.networks.factories import make_mlp_actor_critic
from nnx_ppo.networks.normalizer import NormalizerStatistics

ENV = envs.load("PointReach", {"episode_length": 20})
N_ENVS, ROLLOUT = 8, 4
PER_ITERATION = N_ENVS * ROLLOUT  # 32 env steps per PPO iteration
N_EPOCHS, N_MINIBATCHES = 1, 2
TOTAL = 1056  # 33 iterations: 1056 = 33 * 32
EVAL_EVERY, CHECKPOINT_EVERY = 100, 300
CONFIG = TrainConfig(
    ppo=PPOConfig(
        n_envs=N_ENVS,
        rollout_length=ROLLOUT,
        total_steps=TOTAL,
        n_epochs=N_EPOCHS,
        n_minibatches=N_MINIBATCHES,
    ),
    eval=EvalConfig(every_steps=EVAL_EVERY, n_envs=4, max_episode_length=30),
    checkpoint_every_steps=CHECKPOINT_EVERY,
    seed=17,
)
LOSS_KEYS = ("losses/total", "losses/actor", "losses/critic", "losses/regularization")


def make_networks():
    return make_mlp_actor_critic(
        ENV.observation_size,
        ENV.action_size,
        rngs=nnx.Rngs(0),
        actor_hidden_sizes=(8,),
        critic_hidden_sizes=(8,),
    )


def params_of(networks) -> Any:
    return jax.tree.map(np.array, nnx.state(networks, nnx.Param))


@dataclasses.dataclass
class Run:
    """A finished ``train_ppo`` call and everything its callbacks received."""

    networks: Any
    result: TrainResult
    logs: list[tuple[int, dict[str, float]]]
    checkpoints: list[tuple[int, TrainingState, Any]]  # (step, state, params at that step)

    @property
    def steps(self) -> list[int]:
        return [step for step, _ in self.logs]

    def losses(self, key: str = "losses/total") -> np.ndarray:
        return np.array([metrics[key] for _, metrics in self.logs])


def train(networks=None, config: TrainConfig = CONFIG, checkpoints: bool = False, **kwargs) -> Run:
    networks = make_networks() if networks is None else networks
    logs: list[tuple[int, dict[str, float]]] = []
    saved: list[tuple[int, TrainingState, Any]] = []

    def log_fn(metrics: dict[str, float], step: int) -> None:
        logs.append((step, dict(metrics)))

    def checkpoint_fn(state: TrainingState, step: int) -> None:
        saved.append((step, state, params_of(state.networks)))

    result = train_ppo(
        ENV,
        networks,
        config,
        log_fn=log_fn,
        checkpoint_fn=checkpoint_fn if checkpoints else None,
        **kwargs,
    )
    return Run(networks, result, logs, saved)


def first_steps_passing(every: int, start: int, end: int) -> list[int]:
    """Iteration end-steps (a plain loop) at which ``start + k * PER_ITERATION`` first
    reaches or passes a multiple of ``every``, up to ``end``, plus ``end`` itself."""
    hits, step = [], start
    while step < end:
        before, step = step, step + PER_ITERATION
        if step // every > before // every or step >= end:
            hits.append(step)
    return hits


@pytest.fixture(scope="module")
def standard() -> tuple[Run, Any]:
    """The CONFIG run with checkpoints, and the networks' parameters before training."""
    networks = make_networks()
    initial = params_of(networks)
    return train(networks, checkpoints=True), initial


def test_runs_of_any_length_run_one_program(tmp_path):
    # The premise of the module docstring: a one-iteration run stores its program; a 33-iteration
    # run and a run resumed from the first load it (their chunk lengths used to differ: 1, 32, 32).
    lines: list[str] = []
    cache = ProgramCache(tmp_path, {"env": "PointReach"}, log=lines.append)
    short = dataclasses.replace(CONFIG, ppo=dataclasses.replace(CONFIG.ppo, total_steps=32))
    first = train(config=short, program_cache=cache)
    assert first.steps == [32]
    train(config=CONFIG, program_cache=cache)
    resumed = train(first.networks, initial_state=first.result.training_state, program_cache=cache)
    assert resumed.steps[0] == 64 and resumed.steps[-1] == TOTAL
    actions = [line.split()[2] for line in lines if "train_chunk" in line]
    assert actions == ["stored", "loaded", "loaded"], lines


def test_log_fn_called_once_per_iteration_with_loss_metrics(standard):
    run, _ = standard
    # 33 iterations, logged at 32, 64, ..., 1056.
    assert run.steps == [PER_ITERATION * k for k in range(1, 34)]
    for _, metrics in run.logs:
        for key in LOSS_KEYS:
            assert math.isfinite(metrics[key]), key
    assert len(set(run.losses())) > 1  # a real metric per iteration, not one repeated value
    assert run.result.total_steps == TOTAL
    assert run.result.total_iterations == 33
    assert run.result.final_metrics == run.logs[-1][1]
    assert float(run.result.training_state.steps_taken) == TOTAL


def test_total_steps_and_seed_overrides_are_honoured(standard):
    reference, _ = standard
    # The config says seed 5; the overrides say seed 17 (the reference's) and 1000 steps.
    config = dataclasses.replace(CONFIG, seed=5)
    run = train(config=config, seed=17, total_steps=1000)
    # ceil(1000 / 32) = 32 iterations -> 1024 steps: past 1000 by 24, less than one iteration.
    assert run.result.total_steps == 1024
    assert run.result.total_iterations == 32
    assert run.steps[-1] == 1024 and len(run.logs) == 32
    assert 0 <= run.result.total_steps - 1000 < PER_ITERATION
    # Same seed, same trajectory: the 32 iterations equal the reference's first 32.
    for key in LOSS_KEYS:
        np.testing.assert_allclose(run.losses(key), reference.losses(key)[:32], rtol=1e-5)


def test_different_seed_gives_different_metrics(standard):
    reference, _ = standard
    run = train(seed=18, total_steps=1000)
    assert run.result.total_steps == 1024
    assert not np.allclose(run.losses(), reference.losses()[:32])


def test_evaluations_run_at_first_iteration_past_each_multiple_and_at_the_end(standard):
    run, _ = standard
    # Multiples of 100 are first reached at ceil(m / 32) * 32: 100 -> 128, 200 -> 224,
    # 300 -> 320, 400 -> 416, 500 -> 512, 600 -> 608, 700 -> 704, 800 -> 800, 900 -> 928,
    # 1000 -> 1024; then the end, 1056.
    expected = [128, 224, 320, 416, 512, 608, 704, 800, 928, 1024, 1056]
    assert first_steps_passing(EVAL_EVERY, 0, TOTAL) == expected
    assert [entry["step"] for entry in run.result.eval_history] == expected
    logged = [step for step, metrics in run.logs if "eval/episode_reward" in metrics]
    assert logged == expected
    by_step = dict(run.logs)
    for entry in run.result.eval_history:
        metrics = by_step[entry["step"]]
        assert metrics["eval/episode_reward"] == entry["eval/episode_reward"]
        # PointReach never terminates: every eval episode runs to the 20-step time limit.
        assert entry["eval/episode_length"] == 20
        # Reward is exp(-distance / 0.25) in (0, 1] per step, so 20 steps give (0, 20].
        assert 0 < entry["eval/episode_reward"] <= 20
        for q in (0, 25, 50, 75, 100):
            assert f"eval/episode_reward_p{q}" in metrics


def test_eval_disabled_logs_no_eval_metrics_and_leaves_training_alone(standard):
    reference, _ = standard
    config = dataclasses.replace(CONFIG, eval=dataclasses.replace(CONFIG.eval, enabled=False))
    run = train(config=config)
    assert run.result.eval_history == []
    assert run.steps == reference.steps
    assert not any(key.startswith("eval/") for _, m in run.logs for key in m)
    # Evaluation acts on a copy with its own key: training is the same with or without it.
    np.testing.assert_allclose(run.losses(), reference.losses(), rtol=1e-5)


def test_eval_env_is_used_for_evaluation(standard):
    reference, _ = standard
    short = envs.load("PointReach", {"episode_length": 7})
    run = train(eval_env=short)
    lengths = [entry["eval/episode_length"] for entry in run.result.eval_history]
    assert lengths == [7] * len(reference.result.eval_history)  # not the training env's 20
    for entry in run.result.eval_history:
        assert 0 < entry["eval/episode_reward"] <= 7  # at most 1 per step
    np.testing.assert_allclose(run.losses(), reference.losses(), rtol=1e-5)


def test_checkpoints_at_multiples_and_at_the_end(standard):
    run, _ = standard
    # First iterations past 300, 600, 900: 10 * 32 = 320, 19 * 32 = 608, 29 * 32 = 928;
    # then the end, 1056.
    expected = [320, 608, 928, 1056]
    assert first_steps_passing(CHECKPOINT_EVERY, 0, TOTAL) == expected
    assert [step for step, _, _ in run.checkpoints] == expected
    for step, state, _ in run.checkpoints:
        assert isinstance(state, TrainingState)
        assert float(state.steps_taken) == step


def test_checkpoint_states_are_snapshots_that_stay_usable(standard):
    run, _ = standard
    (_, first, first_params), *_, (_, _, last_params) = run.checkpoints
    # The first snapshot still holds the parameters of step 320, not the final ones.
    now = params_of(first.networks)
    jax.tree.map(np.testing.assert_array_equal, now, first_params)
    assert not all(jax.tree.leaves(jax.tree.map(np.array_equal, first_params, last_params)))
    # Its buffers were not donated to later iterations: it can still act.
    obs = jnp.zeros((3, ENV.observation_size), jnp.float32)
    out = first.networks(first.networks.initialize_state(3), obs).output
    assert np.all(np.isfinite(np.asarray(out.value_estimates)))
    # The final checkpoint holds what training returned.
    jax.tree.map(np.testing.assert_array_equal, params_of(run.networks), last_params)


def test_networks_passed_in_hold_trained_parameters_and_stay_usable(standard):
    run, initial = standard
    networks = run.networks
    assert run.result.training_state.networks is networks
    trained = params_of(networks)
    assert not all(jax.tree.leaves(jax.tree.map(np.array_equal, trained, initial)))
    # The normalizer merged every rollout observation: 33 iterations * 8 envs * 4 steps.
    stats = nnx.state(networks, NormalizerStatistics)
    assert float(stats["layers"][0]["count"][...]) == 33 * N_ENVS * ROLLOUT  # the Normalizer
    # The optimizer took n_epochs * n_minibatches = 2 steps per iteration: 66 in all.
    assert int(run.result.training_state.optimizer.step[...]) == 33 * N_EPOCHS * N_MINIBATCHES
    obs = jnp.ones((3, ENV.observation_size), jnp.float32)
    out = networks(networks.initialize_state(3), obs).output
    assert out.actions.shape == (3, ENV.action_size)
    assert np.all(np.isfinite(np.asarray(out.value_estimates)))


def test_resuming_continues_where_training_stopped(standard):
    reference, _ = standard
    networks = make_networks()
    first = train(networks, total_steps=1024)
    assert first.result.total_iterations == 32
    second = train(networks, initial_state=first.result.training_state, total_steps=2048)
    # Resumed at 1024: the remaining (2048 - 1024) / 32 = 32 iterations, logged at
    # 1056, 1088, ..., 2048.
    assert second.steps == [1024 + PER_ITERATION * k for k in range(1, 33)]
    assert second.result.total_steps == 2048
    assert second.result.total_iterations == 32
    assert float(second.result.training_state.steps_taken) == 2048
    # The eval schedule counts absolute steps: 1100 -> 1120, ..., 2000 -> 2016, end 2048.
    eval_steps = [entry["step"] for entry in second.result.eval_history]
    assert eval_steps == first_steps_passing(EVAL_EVERY, 1024, 2048)
    assert eval_steps[0] == 1120 and eval_steps[-1] == 2048
    # Training itself continues exactly: iteration 33 of the resumed run is iteration 33 of
    # the uninterrupted reference run.
    resumed = np.concatenate([first.losses(), second.losses()[:1]])
    np.testing.assert_allclose(resumed, reference.losses(), rtol=1e-5)
    assert second.result.training_state.networks is networks


def test_initial_state_with_other_env_count_is_rejected():
    networks = make_networks()
    state = new_training_state(ENV, networks, 4, seed=0)  # 4 envs, the config says 8
    with pytest.raises(ValueError, match="n_envs"):
        train_ppo(ENV, networks, CONFIG, initial_state=state)


def test_steps_taken_stays_exact_for_long_runs():
    networks = make_networks()
    start = 2**29
    state = new_training_state(ENV, networks, N_ENVS, seed=0)
    state = state.replace(steps_taken=jnp.asarray(start, state.steps_taken.dtype))
    config = dataclasses.replace(CONFIG, eval=dataclasses.replace(CONFIG.eval, enabled=False))
    run = train(
        networks,
        config=config,
        checkpoints=True,
        initial_state=state,
        total_steps=start + 32 * PER_ITERATION,
    )
    assert run.result.total_steps == start + 32 * PER_ITERATION
    for step, saved, _ in run.checkpoints:
        assert int(saved.steps_taken) == step
    assert int(run.result.training_state.steps_taken) == run.result.total_steps


@pytest.mark.parametrize("obs_size,action_size,match", [(3, 2, "observations"), (6, 3, "size 3")])
def test_network_that_does_not_fit_the_env_is_rejected_before_compiling(
    obs_size, action_size, match
):
    # PointReach observes 6 numbers and takes 2 actions.
    networks = make_mlp_actor_critic(
        obs_size, action_size, rngs=nnx.Rngs(0), actor_hidden_sizes=(8,), critic_hidden_sizes=(8,)
    )
    with pytest.raises(ValueError, match=match):
        train_ppo(ENV, networks, CONFIG)


def test_metrics_are_logged_before_the_checkpoint_of_the_same_iteration():
    events: list[tuple[str, int]] = []
    train_ppo(
        ENV,
        make_networks(),
        CONFIG,
        log_fn=lambda metrics, step: events.append(("log", step)),
        checkpoint_fn=lambda state, step: events.append(("checkpoint", step)),
    )
    checkpoints = [i for i, (what, _) in enumerate(events) if what == "checkpoint"]
    # Multiples of 300 passed at 320, 608, 928, and the end at 1056.
    assert [events[i][1] for i in checkpoints] == [320, 608, 928, 1056]
    for i in checkpoints:
        assert events[i - 1] == ("log", events[i][1])  # that step's metrics came first


DIVERGING = dataclasses.replace(CONFIG, ppo=dataclasses.replace(CONFIG.ppo, learning_rate=1e30))


def test_a_non_finite_loss_stops_training_naming_the_metric_and_step():
    logged: list[tuple[int, dict[str, float]]] = []
    saved: list[int] = []
    with pytest.raises(NonFiniteError) as caught:
        train_ppo(
            ENV,
            make_networks(),
            DIVERGING,
            log_fn=lambda metrics, step: logged.append((step, metrics)),
            checkpoint_fn=lambda state, step: saved.append(step),
        )
    error = caught.value
    assert error.metric.startswith("losses/") and not math.isfinite(error.value)
    assert f"{error.metric} is {error.value} at step {error.step}" in str(error)
    # Everything up to the bad iteration was logged, that iteration last; nothing after it.
    assert logged[-1][0] == error.step and error.step % PER_ITERATION == 0
    assert not math.isfinite(logged[-1][1][error.metric])
    assert all(math.isfinite(m[error.metric]) for _, m in logged[:-1])
    assert all(step < error.step for step in saved)  # no checkpoint of a diverged state


def test_the_non_finite_guard_can_be_turned_off():
    config = dataclasses.replace(DIVERGING, stop_on_non_finite=False)
    result = train_ppo(ENV, make_networks(), config)
    assert result.total_steps == TOTAL
    assert not math.isfinite(result.final_metrics["losses/total"])
    with pytest.raises(ValueError, match="stop_on_non_finite"):
        dataclasses.replace(CONFIG, stop_on_non_finite="yes")


def test_phase_fn_is_told_each_host_loop_phase_as_it_begins():
    events: list[tuple[str, Any]] = []
    train_ppo(
        ENV,
        make_networks(),
        CONFIG,
        log_fn=lambda metrics, step: events.append(("log", step)),
        checkpoint_fn=lambda state, step: events.append(("checkpoint", step)),
        phase_fn=lambda name: events.append(("phase", name)),
    )
    # The first call runs one iteration (it compiles; its metrics then show at once), with no
    # event due at its step 32. Every later chunk ends at an evaluation (the 100-step
    # multiples and the end, which include the checkpoints' 300-step multiples): per chunk,
    # "training" before the jitted call, "evaluating" before its logs, "checkpointing" right
    # before each checkpoint.
    evals = first_steps_passing(EVAL_EVERY, 0, TOTAL)
    saves = first_steps_passing(CHECKPOINT_EVERY, 0, TOTAL)
    expected: list[tuple[str, Any]] = [("phase", "training")]
    for step in evals:
        expected += [("phase", "training"), ("phase", "evaluating")]
        if step in saves:
            expected += [("phase", "checkpointing"), ("checkpoint", step)]
    assert [e for e in events if e[0] != "log"] == expected
    assert saves == [320, 608, 928, 1056] and len(evals) == 11
    # The logs of a chunk come between its "evaluating" and its checkpoint.
    last_log = max(i for i, e in enumerate(events) if e[0] == "log")
    assert events[last_log] == ("log", TOTAL) and events[last_log + 1] == ("phase", "checkpointing")
