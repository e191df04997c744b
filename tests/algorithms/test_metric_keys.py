"""``ppo_metric_keys`` against the keys a real ``train_ppo`` run logs."""

from __future__ import annotations

import dataclasses

from nnx_ppo import envs
from nnx_ppo.algorithms.config import EvalConfig, PPOConfig, TrainConfig
from nnx_ppo.algorithms.metric_keys import ppo_metric_keys
from nnx_ppo.algorithms.training import train_ppo
from nnx_ppo.algorithms.types import LoggingLevel
from nnx_ppo.presets import make_networks


def _networks(env):  # type: ignore[no-untyped-def]
    fields = {"kind": "mlp", "actor_hidden_sizes": [8], "critic_hidden_sizes": [8]}
    return make_networks(fields, env.observation_size, env.action_size, 0)


def test_the_traced_keys_are_the_logged_keys() -> None:
    env = envs.load("PointReach")
    config = TrainConfig(
        ppo=PPOConfig(
            n_envs=8,
            rollout_length=5,
            total_steps=40,
            n_minibatches=2,
            logging_level=LoggingLevel.LOSSES | LoggingLevel.THROUGHPUT,
        ),
        eval=EvalConfig(every_steps=40, n_envs=4, max_episode_length=10),
    )
    logged: set[str] = set()
    train_ppo(env, _networks(env), config, log_fn=lambda m, _step: logged.update(m))
    traced = ppo_metric_keys(env, _networks(env), config)
    assert traced == sorted(logged)
    assert {"eval/episode_reward", "losses/actor", "throughput/env_steps_per_second"} <= logged
    without_eval = dataclasses.replace(config, eval=dataclasses.replace(config.eval, enabled=False))
    assert not any(
        k.startswith("eval/") for k in ppo_metric_keys(env, _networks(env), without_eval)
    )
