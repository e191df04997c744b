"""The metric keys a PPO run reports, found by tracing its step and its evaluation
(``jax.eval_shape``: nothing is compiled or computed) with the run's own config, env and
networks, plus the host loop's ``throughput/`` keys.

A sweep's objective must be one of these (``server.api.sweeps``): which keys exist depends
on the config (``logging_level``, percentiles), the env (reward streams, env metrics) and
the networks, so no fixed list can say.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from nnx_ppo.algorithms.carry import split_state, traced_step
from nnx_ppo.algorithms.config import TrainConfig
from nnx_ppo.algorithms.host_loop import evaluation_fn
from nnx_ppo.algorithms.step import ppo_iteration
from nnx_ppo.algorithms.training import training_state_for
from nnx_ppo.algorithms.types import LoggingLevel, RLEnv
from nnx_ppo.networks.base import StatefulModule

THROUGHPUT_KEYS = ("throughput/env_steps_per_second", "throughput/seconds_per_iteration")
"""What the host loop adds with ``LoggingLevel.THROUGHPUT`` (``host_loop._HostLoop.run``)."""


def ppo_metric_keys(env: RLEnv, networks: StatefulModule, config: TrainConfig) -> list[str]:
    """The sorted keys ``train_ppo(env, networks, config)`` hands to its ``log_fn``.

    The trace uses ``n_minibatches`` envs (the fewest the config allows: the keys do not
    depend on the batch size), so a large ``n_envs`` costs nothing here.
    """
    small = dataclasses.replace(config.ppo, n_envs=config.ppo.n_minibatches)
    config = dataclasses.replace(config, ppo=small)
    graphdef, carry = split_state(training_state_for(env, networks, config))

    def step(state: Any, _extra: Any) -> Any:
        return ppo_iteration(env, state, small)

    keys = set(jax.eval_shape(traced_step(graphdef, step), carry, None)[1])
    if config.eval.enabled:
        evaluate = evaluation_fn(env, graphdef, config.eval)
        keys |= set(jax.eval_shape(evaluate, carry.modules, jax.random.key(0)))
    if small.logging_level & LoggingLevel.THROUGHPUT:
        keys |= set(THROUGHPUT_KEYS)
    return sorted(keys)
