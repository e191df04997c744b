"""The algorithm registry: every name, config, state and class finds its record; the host
loop's carry round-trips both public states through it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms.carry import merge_state, split_state
from nnx_ppo.algorithms.config import (
    DistillationConfig,
    DistillationTrainConfig,
    PPOConfig,
    TrainConfig,
)
from nnx_ppo.algorithms.distillation_step import new_distillation_state
from nnx_ppo.algorithms.registry import ALGORITHMS, algorithm_for
from nnx_ppo.algorithms.step import new_training_state
from nnx_ppo.algorithms.types import DistillationState, TrainingState
from nnx_ppo.networks.factories import make_mlp_actor_critic


def test_each_name_config_and_state_finds_its_algorithm():
    ppo, distillation = ALGORITHMS["ppo"], ALGORITHMS["distillation"]
    for what in ("ppo", TrainConfig, TrainConfig(), TrainingState):
        assert algorithm_for(what) is ppo
    for what in ("distillation", DistillationTrainConfig, DistillationTrainConfig()):
        assert algorithm_for(what) is distillation
    assert algorithm_for(DistillationState) is distillation
    assert [a.name for a in ALGORITHMS.values()] == list(ALGORITHMS) == ["ppo", "distillation"]


def test_loop_config_is_the_section_of_the_config():
    config = DistillationTrainConfig(distillation=DistillationConfig(total_steps=1234))
    assert algorithm_for(config).loop_config(config).total_steps == 1234
    config_ppo = TrainConfig(ppo=PPOConfig(n_envs=8))
    assert algorithm_for(config_ppo).loop_config(config_ppo) is config_ppo.ppo


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("sac", "unknown algorithm 'sac'; known: ppo, distillation"),
        (3, "no algorithm trains with a int"),
        (PPOConfig(), "no algorithm trains with a PPOConfig"),
        (object, "no algorithm trains with a object"),
    ],
)
def test_anything_else_is_refused_by_name(what, message):
    with pytest.raises(ValueError) as error:
        algorithm_for(what)
    assert str(error.value) == message


def test_the_train_hooks_refuse_a_missing_or_extra_teacher():
    with pytest.raises(ValueError, match="PPO takes no teacher"):
        ALGORITHMS["ppo"].train(None, None, TrainConfig(), teacher=object())
    with pytest.raises(ValueError, match="distillation needs a teacher"):
        ALGORITHMS["distillation"].train(None, None, DistillationTrainConfig())
    with pytest.raises(ValueError, match="distillation needs a teacher"):
        ALGORITHMS["distillation"].load_state("nowhere", None, None, DistillationTrainConfig())


def _network(seed: int) -> nnx.Module:
    env = envs.load("PointReach", {"episode_length": 20})
    return make_mlp_actor_critic(
        env.observation_size,
        env.action_size,
        rngs=nnx.Rngs(seed),
        actor_hidden_sizes=(4,),
        critic_hidden_sizes=(4,),
    )


def _leaves(tree):
    return [
        np.asarray(jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x)
        for x in jax.tree.leaves(tree)
    ]


def test_the_carry_round_trips_both_states():
    env = envs.load("PointReach", {"episode_length": 20})
    ppo = new_training_state(env, _network(0), 4, seed=1)
    distillation = new_distillation_state(env, _network(0), _network(1), 4, seed=1)
    for state, kind in ((ppo, "ppo"), (distillation, "distillation")):
        graphdef, carry = split_state(state)
        assert carry.kind == kind
        back = merge_state(graphdef, carry)
        assert type(back) is type(state)
        assert [f for f in vars(back)] == [f for f in vars(state)]
        for name in vars(state):
            before, after = getattr(state, name), getattr(back, name)
            if isinstance(before, nnx.Module | nnx.Optimizer):
                before, after = nnx.state(before), nnx.state(after)
            for x, y in zip(_leaves(before), _leaves(after), strict=True):
                np.testing.assert_array_equal(x, y)
    assert split_state(ppo)[1].teacher_states is None
    teacher_states = split_state(distillation)[1].teacher_states
    assert jax.tree.structure(teacher_states) == jax.tree.structure(distillation.teacher_states)
