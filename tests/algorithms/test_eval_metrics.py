"""Evaluation metrics (``eval_rollout``) and the metric groups of every ``LoggingLevel`` flag.

Each flag is checked where its metrics come from: ``compute_metrics`` (called eagerly on a
hand-made rollout, so the expected values are plain NumPy), ``eval_rollout``, and
``ppo_step`` as ``train_ppo`` runs it (``GRAD_NORM``, ``WEIGHTS``, ``THROUGHPUT``). For each
flag: its metrics are there when it is on, and absent when only it is off.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms.config import EvalConfig, PPOConfig, TrainConfig
from nnx_ppo.algorithms.metrics import compute_metrics
from nnx_ppo.algorithms.rollout import eval_rollout
from nnx_ppo.algorithms.training import train_ppo
from nnx_ppo.algorithms.types import LoggingLevel, Transition
from nnx_ppo.envs import State
from nnx_ppo.networks.base import zero_loss
from nnx_ppo.networks.factories import make_mlp_actor_critic
from nnx_ppo.networks.types import PPONetworkOutput
from tests.algorithms.scripted import StepCounter

EVERYTHING = LoggingLevel.ALL | LoggingLevel.ROLLOUT_OBS
PREFIXES = {
    LoggingLevel.LOSSES: "losses/",
    LoggingLevel.CRITIC_EXTRA: "critic/",
    LoggingLevel.ACTOR_EXTRA: "actor/",
    LoggingLevel.ROLLOUT_STATS: "rollout/",
    LoggingLevel.ROLLOUT_OBS: "obs/",
    LoggingLevel.ENV_METRICS: "env/",
    LoggingLevel.NETWORK_METRICS: "network/",
    LoggingLevel.GRAD_NORM: "optimizer/",
    LoggingLevel.WEIGHTS: "weights/",
    LoggingLevel.THROUGHPUT: "throughput/",
}
FLAGS = list(PREFIXES)


def with_prefix(metrics: dict, prefix: str) -> set[str]:
    return {key for key in metrics if key.startswith(prefix)}


def test_every_flag_has_a_group():
    # Guards PREFIXES: every single-bit flag of LoggingLevel is checked below.
    singles = [f for f in LoggingLevel if f.value and f.value & (f.value - 1) == 0]
    assert set(singles) == set(FLAGS)


# ------------------------------------------------------------------------ eval_rollout


class KnownReturnEnv:
    """Episodes of length ``L`` in {1, ..., 6} (drawn at reset); reward ``L`` per step, so the
    return is ``L * min(L, cut)`` when the rollout is cut after ``cut`` steps. Metric ``left``
    is the number of steps left after the step."""

    observation_size = 1
    action_size = 1

    def reset(self, rng: jax.Array) -> State:
        length = jax.random.randint(rng, (), 1, 7).astype(jnp.float32)
        return State(
            data={"length": length, "left": length},
            obs=jnp.zeros((1,), jnp.float32),
            reward=jnp.zeros(()),
            done=jnp.zeros(()),
            metrics={"left": length},
            info={},
        )

    def step(self, state: State, action: jax.Array) -> State:
        left = state.data["left"] - 1.0
        return state.replace(
            data={**state.data, "left": left},
            reward=state.data["length"],
            done=(left <= 0).astype(jnp.float32),
            metrics={"left": left},
        )


N_EVAL, CUT = 16, 4
EVAL_KEY = jax.random.key(11)


def loop_episodes(env: KnownReturnEnv, key: jax.Array) -> dict[str, np.ndarray]:
    """Returns, lengths and summed ``left`` metric of each env, by plain Python stepping.

    ``eval_rollout`` resets env ``i`` with ``split(split(key)[0], n_envs)[i]`` and stops
    adding once the env is done or ``CUT`` steps have passed.
    """
    keys = jax.random.split(jax.random.split(key)[0], N_EVAL)
    returns, lengths, left_sums = [], [], []
    for i in range(N_EVAL):
        state, total, steps, left = env.reset(keys[i]), 0.0, 0, 0.0
        while steps < CUT and float(state.done) == 0.0:
            state = env.step(state, jnp.zeros((1,)))
            total += float(state.reward)
            left += float(state.metrics["left"])
            steps += 1
        returns.append(total)
        lengths.append(steps)
        left_sums.append(left)
    return {"returns": np.array(returns), "lengths": np.array(lengths), "left": np.array(left_sums)}


@functools.cache
def evaluation(percentiles: tuple[int, ...] | None, level: LoggingLevel) -> dict[str, float]:
    env = KnownReturnEnv()
    rollout = jax.jit(
        lambda key: eval_rollout(env, StepCounter(), N_EVAL, CUT, key, percentiles, level)
    )
    return {k: float(v) for k, v in rollout(EVAL_KEY).items()}


PERCENTILES = (0, 10, 25, 50, 75, 90, 100)


def test_eval_percentiles_equal_numpy_percentiles_of_the_returns():
    expected = loop_episodes(KnownReturnEnv(), EVAL_KEY)
    returns = expected["returns"]
    assert len(set(returns)) >= 4  # a spread, so that percentiles can be wrong
    metrics = evaluation(PERCENTILES, LoggingLevel.NONE)
    keys = [f"eval/episode_reward_p{q}" for q in PERCENTILES]
    assert sorted(metrics) == sorted(["eval/episode_reward", "eval/episode_length", *keys])
    values = [metrics[k] for k in keys]
    assert values == sorted(values)  # p0 <= p10 <= ... <= p100
    np.testing.assert_allclose(values, np.percentile(returns, PERCENTILES), rtol=1e-6)
    assert values[0] == returns.min() and values[-1] == returns.max()
    assert metrics["eval/episode_reward"] == pytest.approx(returns.mean())
    assert metrics["eval/episode_length"] == pytest.approx(expected["lengths"].mean())


def test_eval_without_percentiles_reports_the_std():
    expected = loop_episodes(KnownReturnEnv(), EVAL_KEY)
    metrics = evaluation(None, LoggingLevel.NONE)
    assert sorted(metrics) == [
        "eval/episode_length",
        "eval/episode_reward",
        "eval/episode_reward_std",
    ]
    assert metrics["eval/episode_reward_std"] == pytest.approx(expected["returns"].std())
    assert metrics["eval/episode_reward"] == pytest.approx(expected["returns"].mean())


# ------------------------------------------------------------- compute_metrics, eagerly

T, B = 3, 4
_t = np.arange(T * B, dtype=np.float32).reshape(T, B)  # 0, 1, ..., 11 in [T, B] order
ROLLOUT = Transition(
    obs=jnp.stack([_t, 10.0 + 2.0 * _t], axis=-1),  # dim 0: mean 5.5; dim 1: mean 21
    network_output=PPONetworkOutput(
        actions=(_t / 11.0)[..., None],  # [T, B, 1]: 0, 1/11, ..., 1
        raw_actions=(_t / 11.0)[..., None],
        loglikelihoods=jnp.zeros((T, B)),
        value_estimates=jnp.zeros((T, B)),
        regularization_loss=zero_loss(),
        metrics={"entropy": 1.0 + _t, "action_std": jnp.full((T, B), 0.5)},
        distribution_params={},
    ),
    rewards=jnp.asarray(_t % 3),  # 0, 1, 2, 0, 1, 2, ...: mean 1
    done=jnp.asarray(_t % 4 == 3),  # the last env at each step: 3 of 12
    truncated=jnp.asarray(_t == 11),  # 1 of 12
    next_obs=jnp.zeros((T, B, 2)),
    metrics={"distance": 2.0 * _t},  # mean 11
)
LOSS_METRICS = {
    "losses/total": 1.5,
    "losses/actor": 0.5,
    "losses/critic": 1.0,
    "losses/regularization": 0.0,
    "critic/explained_variance": 0.25,
    "actor/approx_kl": 0.01,
    "optimizer/grad_norm": 3.0,
}
# What compute_metrics reports for each flag it handles, worked out from ROLLOUT above.
EXPECTED = {
    LoggingLevel.LOSSES: {
        "losses/total": 1.5,
        "losses/actor": 0.5,
        "losses/critic": 1.0,
        "losses/regularization": 0.0,
    },
    LoggingLevel.CRITIC_EXTRA: {"critic/explained_variance": 0.25},
    LoggingLevel.ACTOR_EXTRA: {"actor/approx_kl": 0.01},
    LoggingLevel.GRAD_NORM: {"optimizer/grad_norm": 3.0},
    LoggingLevel.ROLLOUT_STATS: {
        "rollout/reward/mean": 1.0,
        "rollout/reward/std": np.std(_t % 3),  # sqrt(2/3)
        "rollout/done_fraction": 0.25,
        "rollout/truncated_fraction": 1 / 12,
        "rollout/action/mean": 0.5,  # (0 + 1 + ... + 11) / 11 / 12
        "rollout/action/std": np.std(_t / 11.0),
    },
    LoggingLevel.ROLLOUT_OBS: {
        "obs/0_0/mean": 5.5,
        "obs/0_0/std": np.std(_t),
        "obs/0_1/mean": 21.0,  # 10 + 2 * 5.5
        "obs/0_1/std": 2.0 * np.std(_t),
    },
    LoggingLevel.ENV_METRICS: {"env/distance": 11.0},
    LoggingLevel.NETWORK_METRICS: {
        "network/entropy/mean": 6.5,
        "network/entropy/std": np.std(_t),
        "network/action_std/mean": 0.5,
        "network/action_std/std": 0.0,
    },
}


def computed(level: LoggingLevel, percentiles=None) -> dict[str, float]:
    metrics = compute_metrics(LOSS_METRICS, ROLLOUT, level, percentiles)
    return {k: float(v) for k, v in metrics.items()}


def test_compute_metrics_reports_nothing_at_level_none():
    assert computed(LoggingLevel.NONE) == {}


def test_rollout_stats_with_percentiles():
    metrics = computed(LoggingLevel.ROLLOUT_STATS, (0, 50, 100))
    # Rewards 0, 1, 2 four times each: median 1; actions 0 .. 1: median 5.5 / 11 = 0.5.
    assert metrics["rollout/reward/p0"] == 0.0
    assert metrics["rollout/reward/p50"] == 1.0
    assert metrics["rollout/reward/p100"] == 2.0
    assert metrics["rollout/action/p50"] == pytest.approx(0.5)
    assert "rollout/reward/mean" not in metrics and "rollout/reward/std" not in metrics


# ----------------------------------------------------------------- ppo_step in train_ppo

ENV = envs.load("PointReach", {"episode_length": 20})


@functools.cache
def train_logs(level: LoggingLevel) -> tuple[tuple[dict[str, float], ...], dict[str, float]]:
    """Per-iteration metrics of a tiny train_ppo run at ``level`` and its final metrics."""
    config = TrainConfig(
        ppo=PPOConfig(
            n_envs=8,
            rollout_length=4,
            total_steps=64,  # 2 iterations
            n_epochs=1,
            n_minibatches=2,
            logging_level=level,
        ),
        eval=EvalConfig(enabled=False),
    )
    networks = make_mlp_actor_critic(
        ENV.observation_size,
        ENV.action_size,
        rngs=nnx.Rngs(0),
        actor_hidden_sizes=(8,),
        critic_hidden_sizes=(8,),
    )
    logs: list[dict[str, float]] = []
    result = train_ppo(ENV, networks, config, log_fn=lambda metrics, step: logs.append(metrics))
    assert len(logs) == 2
    return tuple(logs), result.final_metrics


# ------------------------------------------------------------------ one test per flag


@pytest.mark.parametrize("flag", FLAGS, ids=lambda f: f.name)
def test_flag_reports_its_group_only_when_on(flag):
    prefix = PREFIXES[flag]
    if flag in EXPECTED:
        # compute_metrics: exactly the expected values with the flag alone...
        alone = computed(flag)
        assert alone.keys() == EXPECTED[flag].keys()
        for key, value in EXPECTED[flag].items():
            assert alone[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key
        # ...and none of them with every other flag on.
        rest = computed(EVERYTHING & ~flag)
        assert not with_prefix(rest, prefix)
        assert rest  # the others still report
    # Through ppo_step (train_ppo): present and finite with everything on.
    logs, final = train_logs(EVERYTHING)
    metrics = final if flag is LoggingLevel.THROUGHPUT else logs[0]
    on = with_prefix(metrics, prefix)
    assert on, f"no {prefix}* metrics with {flag.name} on"
    assert all(math.isfinite(metrics[key]) for key in on)
    if flag in (LoggingLevel.GRAD_NORM, LoggingLevel.WEIGHTS, LoggingLevel.THROUGHPUT):
        # Added outside compute_metrics: train with only this flag off.
        off_logs, off_final = train_logs(EVERYTHING & ~flag)
        for m in (*off_logs, off_final):
            assert not with_prefix(m, prefix)
            assert with_prefix(m, "losses/")
    if flag is LoggingLevel.GRAD_NORM:
        assert metrics["optimizer/grad_norm"] > 0
    if flag is LoggingLevel.WEIGHTS:
        assert metrics["weights/norm"] > 0 and metrics["weights/max_abs"] > 0
    if flag is LoggingLevel.THROUGHPUT:
        assert final["throughput/env_steps_per_second"] > 0
        assert final["throughput/seconds_per_iteration"] > 0
    if flag is LoggingLevel.ENV_METRICS:
        assert "env/distance" in metrics  # PointReach's metric
        check_eval_env_metrics()


def check_eval_env_metrics() -> None:
    """``eval/env/*`` from eval_rollout: the mean of the metric over live steps."""
    expected = loop_episodes(KnownReturnEnv(), EVAL_KEY)
    on = evaluation(PERCENTILES, LoggingLevel.ENV_METRICS)
    mean_left = expected["left"].sum() / expected["lengths"].sum()
    assert on["eval/env/left"] == pytest.approx(mean_left, rel=1e-6)
    off = evaluation(PERCENTILES, EVERYTHING & ~LoggingLevel.ENV_METRICS)
    assert not with_prefix(off, "eval/env/")
    assert with_prefix(off, "eval/episode_reward")


def test_train_metrics_at_level_none_are_empty():
    # With every flag off, ppo_step reports nothing; THROUGHPUT is off too.
    logs, final = train_logs(LoggingLevel.NONE)
    assert all(m == {} for m in logs) and final == {}
