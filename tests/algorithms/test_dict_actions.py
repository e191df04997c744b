"""Dict actions end to end: ``PPOAdapter(action=Map({head: sampler}))`` on ``TwoArmReach``
learns, evaluates, renders, resumes exactly from a checkpoint and distils."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import config as C
from nnx_ppo.algorithms.checkpointing import load_checkpoint, make_checkpoint_fn
from nnx_ppo.algorithms.distillation import train_distillation
from nnx_ppo.algorithms.ppo import train_ppo
from nnx_ppo.algorithms.render_rollout import eval_rollout_for_render_scan
from nnx_ppo.algorithms.step import new_training_state
from nnx_ppo.algorithms.training import MAX_ITERATIONS_PER_CALL, check_compatible
from nnx_ppo.algorithms.types import LoggingLevel
from nnx_ppo.networks.adapter import PPOAdapter
from nnx_ppo.networks.containers import Sequential, Splitter
from nnx_ppo.networks.feedforward import Dense
from nnx_ppo.networks.normalizer import Normalizer
from nnx_ppo.networks.sampling_layers import NormalTanhSampler
from nnx_ppo.networks.utils import Flattener, Map

SMALL_INIT = nnx.initializers.variance_scaling(0.01, "fan_in", "uniform")


def two_arm_network(hidden: int = 32, seed: int = 0) -> Sequential:
    """Normalizer -> a shared MLP torso -> one tanh-normal sampler per arm."""
    rngs = nnx.Rngs(seed)
    obs = envs.TwoArmReach().observation_size
    return Sequential(
        [
            Normalizer(obs),
            PPOAdapter(
                action=Sequential(
                    [
                        Flattener(),
                        Dense(12, hidden, rngs, activation="swish"),
                        Dense(hidden, hidden, rngs, activation="swish"),
                        Dense(hidden, 8, rngs, kernel_init=SMALL_INIT),
                        Splitter(left=4, right=4),
                        Map(
                            left=NormalTanhSampler(rngs, 0.01), right=NormalTanhSampler(rngs, 0.01)
                        ),
                    ]
                ),
                value=Sequential(
                    [
                        Flattener(),
                        Dense(12, hidden, rngs, activation="swish"),
                        Dense(hidden, hidden, rngs, activation="swish"),
                        Dense(hidden, 1, rngs),
                    ]
                ),
            ),
        ]
    )


def test_two_arm_reach_takes_dict_actions_and_scores_each_arm():
    env = envs.TwoArmReach()
    assert env.action_size == {"left": 2, "right": 2}
    state = env.reset(jax.random.key(0))
    assert {k: v.shape for k, v in state.obs.items()} == {"left": (6,), "right": (6,)}
    data = state.data
    # Push the left arm towards its target and the right one away from it.
    toward = jnp.sign(data.target[0] - data.pos[0])
    away = -jnp.sign(data.target[1] - data.pos[1])
    stepped = env.step(state, {"left": toward, "right": away})
    assert stepped.metrics["distance/left"] < jnp.linalg.norm(data.pos[0] - data.target[0])
    assert stepped.metrics["distance/right"] > jnp.linalg.norm(data.pos[1] - data.target[1])
    # Reward: the mean over the arms of exp(-distance / 0.25).
    d = jnp.stack([stepped.metrics["distance/left"], stepped.metrics["distance/right"]])
    np.testing.assert_allclose(stepped.reward, jnp.mean(jnp.exp(-d / 0.25)), rtol=1e-6)
    assert envs.describe("TwoArmReach")["action_size"] == 4
    assert envs.describe("TwoArmReach")["action_heads"] == {"left": 2, "right": 2}


def test_check_compatible_accepts_matching_heads_and_names_missing_ones():
    env = envs.TwoArmReach()
    check_compatible(env, two_arm_network(hidden=4))
    rngs = nnx.Rngs(0)
    one_head = Sequential(
        [
            Flattener(),
            PPOAdapter(
                action=Sequential(
                    [
                        Dense(12, 8, rngs),
                        Splitter(left=4, other=4),
                        Map(left=NormalTanhSampler(rngs, 0.0), other=NormalTanhSampler(rngs, 0.0)),
                    ]
                ),
                value=Dense(12, 1, rngs),
            ),
        ]
    )
    with pytest.raises(ValueError, match=r"the env's action heads are \['left', 'right'\]"):
        check_compatible(env, one_head)


def config(total_steps: int, **ppo: Any) -> C.TrainConfig:
    return C.TrainConfig(
        ppo=C.PPOConfig(
            n_envs=ppo.pop("n_envs", 64),
            rollout_length=ppo.pop("rollout_length", 20),
            total_steps=total_steps,
            learning_rate=ppo.pop("learning_rate", 1e-3),
            n_minibatches=4,
            n_epochs=4,
            **ppo,
        ),
        eval=C.EvalConfig(every_steps=total_steps, n_envs=64, max_episode_length=100),
        seed=0,
    )


@pytest.mark.slow
def test_two_heads_learn_two_arm_reach():
    env = envs.load("TwoArmReach")
    logging = LoggingLevel.LOSSES | LoggingLevel.ACTOR_EXTRA
    cfg = config(150_000, learning_rate=3e-3, logging_level=logging)
    result = train_ppo(env, two_arm_network(), cfg)
    reward = result.eval_history[-1]["eval/episode_reward"]
    # A random policy scores about 8 of 100, a PD controller on each arm about 94. Two arms
    # learn slower than PointReach's one (each head's advantage also carries the other
    # arm's reward): at learning rate 1e-3 this network scored 12.5 after 100k steps (a
    # one-head network of the same weights on the [4] action split into the dict: 12.3)
    # and 83 after 300k. At 3e-3, after 150k steps (CPU; network and TrainConfig seed
    # alike): 80.0, 82.8, 78.3 with seeds 0, 1, 2.
    assert reward > 60.0
    metrics = result.final_metrics
    # Per-head entropies are logged, and the joint entropy is their sum.
    joint = metrics["actor/entropy"]
    heads = metrics["actor/entropy/left"] + metrics["actor/entropy/right"]
    np.testing.assert_allclose(joint, heads, rtol=1e-4)


def test_the_render_rollout_steps_dict_actions():
    env = envs.load("TwoArmReach")
    net = two_arm_network(hidden=4)
    _, _, total = eval_rollout_for_render_scan(env, net, 5, jax.random.key(0))
    assert np.isfinite(float(total)) and float(total) > 0.0


# As in test_checkpointing: halves of MAX_ITERATIONS_PER_CALL iterations (a full chunk each);
# the straight and the resumed runs execute the very same compiled chunk.
N_ENVS, ROLLOUT = 8, 4
HALF = MAX_ITERATIONS_PER_CALL * N_ENVS * ROLLOUT
RESUME_CONFIG = C.TrainConfig(
    ppo=C.PPOConfig(
        n_envs=N_ENVS, rollout_length=ROLLOUT, total_steps=2 * HALF, n_epochs=1, n_minibatches=2
    ),
    eval=C.EvalConfig(every_steps=HALF // 2, n_envs=4, max_episode_length=20),
    checkpoint_every_steps=HALF,
    seed=17,
)


def test_resuming_a_dict_action_run_from_a_checkpoint_is_exact(tmp_path):
    env = envs.load("TwoArmReach", {"episode_length": 20})
    cfg = RESUME_CONFIG

    def logger(logs: list) -> Any:
        return lambda metrics, step: logs.append((step, dict(metrics)))

    straight_logs: list = []
    straight = train_ppo(env, two_arm_network(hidden=4), cfg, log_fn=logger(straight_logs))
    first_logs: list = []
    train_ppo(
        env,
        two_arm_network(hidden=4),
        cfg,
        total_steps=HALF,
        log_fn=logger(first_logs),
        checkpoint_fn=make_checkpoint_fn(str(tmp_path), config=cfg),
    )
    assert first_logs == straight_logs[: len(first_logs)]
    # A template of other parameters and RNG keys: everything comes from the checkpoint.
    template = new_training_state(env, two_arm_network(hidden=4, seed=1), N_ENVS, 1)
    ckpt = load_checkpoint(
        str(tmp_path / f"step_{HALF:010d}"), template.networks, template.optimizer
    )
    resumed_logs: list = []
    resumed = train_ppo(
        env,
        template.networks,
        cfg,
        initial_state=ckpt["training_state"],
        log_fn=logger(resumed_logs),
    )
    # Every metric of every resumed iteration, evaluations included, is the straight run's.
    assert resumed_logs == straight_logs[len(first_logs) :]
    assert any("eval/episode_reward" in m for _, m in resumed_logs)
    # Parameters, normalizer statistics and the samplers' RNG keys.
    for a, b in zip(
        jax.tree.leaves(nnx.state(resumed.training_state.networks)),
        jax.tree.leaves(nnx.state(straight.training_state.networks)),
        strict=True,
    ):
        np.testing.assert_array_equal(plain(a), plain(b))


def plain(x: Any) -> np.ndarray:
    """``x`` as numpy; a PRNG key as its raw key data."""
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(x))
    return np.asarray(x)


def test_distillation_of_a_dict_action_teacher_reduces_the_summed_kl():
    env = envs.load("TwoArmReach", {"episode_length": 20})
    teacher = two_arm_network(hidden=8, seed=1)
    student = two_arm_network(hidden=8, seed=2)
    cfg = C.DistillationTrainConfig(
        distillation=C.DistillationConfig(
            n_envs=16,
            rollout_length=8,
            total_steps=16 * 8 * 12,
            learning_rate=3e-3,
            n_minibatches=2,
            n_epochs=2,
            logging_level=LoggingLevel.LOSSES | LoggingLevel.ACTOR_EXTRA,
        ),
        eval=C.EvalConfig(every_steps=10**9, n_envs=4, max_episode_length=20),
        seed=0,
    )
    logs: list = []
    train_distillation(env, student, teacher, cfg, log_fn=lambda m, s: logs.append((s, dict(m))))
    losses = [m["losses/distillation"] for _, m in logs]
    assert losses[-1] < 0.5 * losses[0]
    last = logs[-1][1]
    assert {"actor/kl/left", "actor/kl/right"} <= set(last)
