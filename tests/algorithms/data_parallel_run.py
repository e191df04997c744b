"""Trains the same tiny runs on one and on two host devices and prints what the test
compares, as JSON. Run as a script in a process of its own (``test_data_parallel``): the
device count is fixed when JAX starts (``XLA_FLAGS`` must be set before)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
from typing import Any

import jax
import numpy as np
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms.checkpointing import load_checkpoint, make_checkpoint_fn
from nnx_ppo.algorithms.config import (
    DistillationConfig,
    DistillationTrainConfig,
    EvalConfig,
    PPOConfig,
    TrainConfig,
)
from nnx_ppo.algorithms.distillation import train_distillation
from nnx_ppo.algorithms.training import train_ppo, training_state_for
from nnx_ppo.networks import factories
from nnx_ppo.utils import enable_compilation_cache

ENV = envs.load("PointReach", {"episode_length": 20})
PER_ITERATION = 8 * 4
EVAL = EvalConfig(every_steps=10**9, n_envs=4, max_episode_length=10)
PPO = TrainConfig(
    ppo=PPOConfig(
        n_envs=8,
        rollout_length=4,
        total_steps=6 * PER_ITERATION,
        n_epochs=2,
        n_minibatches=2,
        learning_rate=1e-3,
    ),
    eval=EVAL,
    checkpoint_every_steps=3 * PER_ITERATION,
)
DISTILL = DistillationTrainConfig(
    distillation=DistillationConfig(
        n_envs=8, rollout_length=4, total_steps=4 * PER_ITERATION, n_epochs=2, n_minibatches=2
    ),
    eval=EVAL,
)


def network(kind: str) -> Any:
    factory = (
        factories.make_lstm_actor_critic if kind == "lstm" else factories.make_mlp_actor_critic
    )
    sizes = {"lstm_size": 8} if kind == "lstm" else {}
    return factory(
        ENV.observation_size,
        ENV.action_size,
        rngs=nnx.Rngs(0),
        actor_hidden_sizes=(8,),
        critic_hidden_sizes=(8,),
        **sizes,
    )


def params(module: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(module, nnx.Param))]


def max_difference(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b, strict=True))


def devices_of(state: Any) -> int:
    """How many devices the env states are spread over."""
    return len(jax.tree.leaves(state.env_states)[0].sharding.device_set)


def ppo(kind: str, devices: int | None, **kwargs: Any) -> tuple[list[float], Any, Any]:
    losses: list[float] = []
    module = network(kind)
    result = train_ppo(
        ENV,
        module,
        dataclasses.replace(PPO, devices=devices),
        log_fn=lambda metrics, step: losses.append(metrics["losses/total"]),
        **kwargs,
    )
    # The trained modules: the given network, or those of ``initial_state`` when resuming.
    return losses, result.training_state.networks, result.training_state


def main() -> None:
    enable_compilation_cache(os.environ["NNX_PPO_JAX_CACHE"])
    out: dict[str, Any] = {"device_count": jax.device_count()}
    for kind in ("mlp", "lstm"):
        one, one_module, _ = ppo(kind, None)
        two, two_module, two_state = ppo(kind, 2)
        out[kind] = {
            "losses_1": one,
            "losses_2": two,
            "param_difference": max_difference(params(one_module), params(two_module)),
            "devices_used": devices_of(two_state),
        }

    # A checkpoint written on two devices, resumed on one and on two.
    with tempfile.TemporaryDirectory() as directory:
        half = dataclasses.replace(
            PPO, ppo=dataclasses.replace(PPO.ppo, total_steps=3 * PER_ITERATION)
        )
        ppo_half = dataclasses.replace(half, devices=2)
        train_ppo(
            ENV, network("mlp"), ppo_half, checkpoint_fn=make_checkpoint_fn(directory, ppo_half)
        )
        path = os.path.join(directory, f"step_{3 * PER_ITERATION:010d}")
        straight, straight_module, _ = ppo("mlp", None)
        resumed = {}
        for devices in (None, 2):
            template = training_state_for(ENV, network("mlp"), PPO)
            state = load_checkpoint(path, template.networks, template.optimizer)["training_state"]
            losses, module, _ = ppo("mlp", devices, initial_state=state)
            resumed[str(devices or 1)] = {
                "losses": losses,
                "param_difference": max_difference(params(straight_module), params(module)),
            }
        out["resume"] = {"straight_tail": straight[3:], **resumed}

    # Distillation of the trained MLP into a fresh student, on one and on two devices.
    teacher = network("mlp")
    train_ppo(ENV, teacher, PPO)
    students = {}
    for devices in (None, 2):
        student = network("mlp")
        losses: list[float] = []
        result = train_distillation(
            ENV,
            student,
            teacher,
            dataclasses.replace(DISTILL, devices=devices),
            log_fn=lambda metrics, step, losses=losses: losses.append(
                metrics["losses/distillation"]
            ),
        )
        students[str(devices or 1)] = (losses, params(student), devices_of(result.training_state))
    out["distillation"] = {
        "losses_1": students["1"][0],
        "losses_2": students["2"][0],
        "param_difference": max_difference(students["1"][1], students["2"][1]),
        "devices_used": students["2"][2],
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
