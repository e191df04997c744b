"""Training's explicit matmul precision, and a tiny bfloat16 PPO run that learns."""

from __future__ import annotations

import jax
import numpy as np
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms import config as C
from nnx_ppo.algorithms.matmul_precision import describe_precision, explicit_matmul_precision
from nnx_ppo.algorithms.ppo import train_ppo
from nnx_ppo.networks import factories


def matmul_precision() -> str | None:
    return getattr(jax.config, "jax_default_matmul_precision")  # noqa: B009 (not typed)


def test_highest_unless_the_caller_set_a_precision():
    assert matmul_precision() is None  # JAX's device-dependent default: TF32 on some GPUs
    with explicit_matmul_precision() as precision:
        assert precision == matmul_precision() == "highest"
    assert matmul_precision() is None
    with jax.default_matmul_precision("tensorfloat32"), explicit_matmul_precision() as kept:
        assert kept == matmul_precision() == "tensorfloat32"


def test_the_run_log_line_names_the_precisions_and_the_device():
    line = describe_precision()
    assert line == f"precision: float32, matmul precision highest, device {jax.default_backend()}"
    assert describe_precision("bfloat16").startswith("precision: bfloat16, matmul precision ")


def test_a_bfloat16_network_learns_under_the_highest_matmul_precision():
    env = envs.load("PointReach")
    networks = factories.make_mlp_actor_critic(
        env.observation_size,
        env.action_size,
        rngs=nnx.Rngs(0),
        actor_hidden_sizes=(32, 32),
        critic_hidden_sizes=(32, 32),
        precision="bfloat16",
    )
    n_envs, rollout_length, iterations = 64, 20, 24
    total_steps = n_envs * rollout_length * iterations
    config = C.TrainConfig(
        ppo=C.PPOConfig(
            n_envs=n_envs,
            rollout_length=rollout_length,
            total_steps=total_steps,
            learning_rate=1e-3,
        ),
        eval=C.EvalConfig(every_steps=total_steps // 4, n_envs=64, max_episode_length=100),
        seed=0,
    )
    precisions, totals, critic = set(), [], []

    def log_fn(metrics: dict, step: int) -> None:
        precisions.add(matmul_precision())
        totals.append(float(metrics["losses/total"]))
        critic.append(float(metrics["losses/critic"]))

    result = train_ppo(env, networks, config, log_fn=log_fn)
    assert precisions == {"highest"} and matmul_precision() is None  # set for training only
    assert len(totals) == iterations and np.all(np.isfinite(totals))
    params = jax.tree.leaves(nnx.state(result.training_state.networks, nnx.Param))
    assert {str(p.dtype) for p in params} == {"float32"}
    assert np.all(np.isfinite([e["eval/episode_reward"] for e in result.eval_history]))
    # The value function learns: the first iteration's value loss is the untrained critic's
    # error on the returns; it falls severalfold once the critic fits them (and may rise
    # again later, as the policy's returns grow: the last iterations' mean was at 0.64 of
    # the first two's with one random stream, 0.3 or less with others).
    assert min(critic[2:]) < 0.3 * critic[0], critic
