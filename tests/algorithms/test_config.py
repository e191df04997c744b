"""Config dataclasses: the spec's defaults, validation naming the field, immutability."""

from __future__ import annotations

import dataclasses
import math
import re
import time

import pytest
from flax import nnx

from nnx_ppo import envs
from nnx_ppo.algorithms.config import (
    DistillationConfig,
    DistillationTrainConfig,
    EvalConfig,
    PPOConfig,
    TrainConfig,
    VideoConfig,
)
from nnx_ppo.algorithms.training import default_config, train_ppo
from nnx_ppo.algorithms.types import LoggingLevel
from nnx_ppo.networks.factories import make_mlp_actor_critic

# The two configs that share the optimization fields, with the prefix their messages use.
OPTIMIZATION_CONFIGS = [(PPOConfig, "ppo"), (DistillationConfig, "distillation")]


def raises_naming(*fields: str):
    """``pytest.raises(ValueError)`` whose message must mention every one of ``fields``."""
    pattern = "".join(f"(?=.*{re.escape(f)})" for f in fields)
    return pytest.raises(ValueError, match=re.compile(pattern, re.DOTALL))


# ---------------------------------------------------------------------------------------
# Defaults


def test_ppo_defaults_match_spec():
    c = PPOConfig()
    assert (c.n_envs, c.rollout_length, c.total_steps) == (256, 20, 512000)
    assert (c.gae_lambda, c.discounting_factor, c.clip_range) == (0.95, 0.99, 0.2)
    assert c.learning_rate == 1e-4
    assert (c.n_epochs, c.n_minibatches) == (4, 4)


def test_eval_video_and_train_defaults_match_spec():
    e = EvalConfig()
    assert e.enabled
    assert (e.every_steps, e.n_envs, e.max_episode_length) == (50000, 64, 1000)
    assert e.logging_percentiles == (0, 25, 50, 75, 100)
    assert not VideoConfig().enabled
    t = TrainConfig()
    assert (t.seed, t.checkpoint_every_steps) == (17, 500000)
    assert t.ppo == PPOConfig() and t.eval == EvalConfig() and t.video == VideoConfig()
    assert default_config() == t


def test_default_sub_configs_are_not_shared():
    # default_factory, not a shared mutable default: each TrainConfig gets its own objects.
    a, b = TrainConfig(), TrainConfig()
    assert a.ppo is not b.ppo
    assert VideoConfig().render_kwargs is not VideoConfig().render_kwargs


# ---------------------------------------------------------------------------------------
# Immutability


@pytest.mark.parametrize(
    ("config", "field", "value"),
    [
        (PPOConfig(), "n_envs", 8),
        (EvalConfig(), "every_steps", 10),
        (VideoConfig(), "enabled", True),
        (TrainConfig(), "seed", 3),
        (DistillationConfig(), "n_epochs", 1),
        (DistillationTrainConfig(), "checkpoint_every_steps", 10),
    ],
)
def test_configs_are_frozen(config, field, value):
    before = getattr(config, field)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(config, field, value)
    assert getattr(config, field) == before


def test_replace_revalidates():
    # A derived config goes through the same validation as a new one.
    with raises_naming("ppo.clip_range"):
        dataclasses.replace(PPOConfig(), clip_range=1.0)
    assert dataclasses.replace(PPOConfig(), n_envs=8, n_minibatches=2).n_envs == 8


# ---------------------------------------------------------------------------------------
# Shared optimization fields (PPOConfig and DistillationConfig)


@pytest.mark.parametrize(("cls", "owner"), OPTIMIZATION_CONFIGS)
@pytest.mark.parametrize(
    "field", ["n_envs", "rollout_length", "total_steps", "n_epochs", "n_minibatches"]
)
@pytest.mark.parametrize("value", [0, -4, 2.0, True])
def test_sizes_must_be_positive_integers(cls, owner, field, value):
    # n_envs = 4 with n_minibatches = 1 keeps divisibility out of the way.
    base = {"n_envs": 4, "n_minibatches": 1}
    with raises_naming(f"{owner}.{field}", repr(value)):
        cls(**{**base, field: value})


@pytest.mark.parametrize(("cls", "owner"), OPTIMIZATION_CONFIGS)
def test_n_envs_must_divide_into_minibatches(cls, owner):
    # 10 envs cannot be split into 4 equal minibatches; the message names both fields.
    with raises_naming(f"{owner}.n_envs", f"{owner}.n_minibatches", "10", "4"):
        cls(n_envs=10, n_minibatches=4)
    assert cls(n_envs=12, n_minibatches=4).n_envs == 12  # 12 = 4 * 3 is accepted


@pytest.mark.parametrize(("cls", "owner"), OPTIMIZATION_CONFIGS)
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("learning_rate", 0.0),
        ("learning_rate", -1e-3),
        ("learning_rate", math.inf),
        ("learning_rate", math.nan),
        ("gradient_clipping", 0.0),
        ("gradient_clipping", -1.0),
        ("weight_decay", -0.1),
        ("logging_level", 1),
        ("logging_percentiles", (50, 101)),
        ("logging_percentiles", (-1,)),
        ("logging_percentiles", "50"),
        ("logging_percentiles", ("p50",)),
    ],
)
def test_optimization_fields_are_checked(cls, owner, field, value):
    with raises_naming(f"{owner}.{field}"):
        cls(**{field: value})


@pytest.mark.parametrize(("cls", "_owner"), OPTIMIZATION_CONFIGS)
def test_optional_and_boundary_values_are_accepted(cls, _owner):
    cfg = cls(
        gradient_clipping=None,
        weight_decay=0.0,
        logging_level=LoggingLevel.ALL,
        logging_percentiles=[0, 100],
    )
    assert cfg.weight_decay == 0.0
    assert cls(logging_percentiles=None).logging_percentiles is None


# ---------------------------------------------------------------------------------------
# PPO-only fields


@pytest.mark.parametrize("clip", [0.0, 1.0, -0.1, 1.5, math.nan])
def test_clip_range_must_be_inside_open_unit_interval(clip):
    with raises_naming("ppo.clip_range"):
        PPOConfig(clip_range=clip)


@pytest.mark.parametrize("clip", [1e-6, 0.5, 0.999])
def test_clip_range_inside_interval_is_accepted(clip):
    assert PPOConfig(clip_range=clip).clip_range == clip


@pytest.mark.parametrize("lam", [-0.01, 1.01, math.inf, "0.9"])
def test_gae_lambda_must_be_in_closed_unit_interval(lam):
    with raises_naming("ppo.gae_lambda"):
        PPOConfig(gae_lambda=lam)


@pytest.mark.parametrize("lam", [0.0, 1.0])
def test_gae_lambda_endpoints_are_accepted(lam):
    assert PPOConfig(gae_lambda=lam).gae_lambda == lam


@pytest.mark.parametrize("gamma", [0.0, -0.5, 1.01, math.nan])
def test_discounting_factor_must_be_in_half_open_unit_interval(gamma):
    with raises_naming("ppo.discounting_factor"):
        PPOConfig(discounting_factor=gamma)


def test_discounting_factor_of_one_is_accepted():
    assert PPOConfig(discounting_factor=1.0).discounting_factor == 1.0


@pytest.mark.parametrize("weight", [-1.0, math.nan])
def test_critic_loss_weight_must_be_non_negative(weight):
    with raises_naming("ppo.critic_loss_weight"):
        PPOConfig(critic_loss_weight=weight)


# ---------------------------------------------------------------------------------------
# Eval, video and top-level configs


@pytest.mark.parametrize("field", ["every_steps", "n_envs", "max_episode_length"])
@pytest.mark.parametrize("value", [0, -1, 1.5])
def test_eval_sizes_must_be_positive_integers(field, value):
    with raises_naming(f"eval.{field}"):
        EvalConfig(**{field: value})


@pytest.mark.parametrize(
    ("field", "value"),
    [("logging_percentiles", (0, 200)), ("logging_percentiles", 50), ("logging_level", "ALL")],
)
def test_eval_logging_fields_are_checked(field, value):
    with raises_naming(f"eval.{field}"):
        EvalConfig(**{field: value})


@pytest.mark.parametrize("field", ["every_steps", "episode_length"])
@pytest.mark.parametrize("value", [0, -10])
def test_video_sizes_must_be_positive_integers(field, value):
    with raises_naming(f"video.{field}"):
        VideoConfig(**{field: value})


@pytest.mark.parametrize("cls", [TrainConfig, DistillationTrainConfig])
@pytest.mark.parametrize("value", [0, -100, 10.0])
def test_checkpoint_every_steps_must_be_positive_integer(cls, value):
    with raises_naming("checkpoint_every_steps"):
        cls(checkpoint_every_steps=value)


@pytest.mark.parametrize("cls", [TrainConfig, DistillationTrainConfig])
@pytest.mark.parametrize("value", [1.5, "17", None])
def test_seed_must_be_an_integer(cls, value):
    with raises_naming("seed"):
        cls(seed=value)


# ---------------------------------------------------------------------------------------
# train_ppo validates before it compiles anything


class ResetCountingEnv:
    """Forwards to a built-in env and counts how often ``reset`` is called (or traced)."""

    def __init__(self):
        self.env = envs.load("PointReach", {"episode_length": 5})
        self.observation_size = self.env.observation_size
        self.action_size = self.env.action_size
        self.resets = 0

    def reset(self, rng):
        self.resets += 1
        return self.env.reset(rng)

    def step(self, state, action):
        return self.env.step(state, action)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [({"total_steps": 0}, "ppo.total_steps"), ({"seed": "seven"}, "seed")],
)
def test_train_ppo_rejects_bad_override_before_compiling(overrides, field):
    env = ResetCountingEnv()
    networks = make_mlp_actor_critic(
        env.observation_size,
        env.action_size,
        rngs=nnx.Rngs(0),
        actor_hidden_sizes=(8,),
        critic_hidden_sizes=(8,),
    )
    config = TrainConfig(ppo=PPOConfig(n_envs=8, rollout_length=4, n_minibatches=2))
    start = time.perf_counter()
    with raises_naming(field):
        train_ppo(env, networks, config, **overrides)
    # Resetting the envs is the first thing that gets traced; it never happened, and the
    # call returned far faster than any compilation (which takes seconds).
    assert env.resets == 0
    assert time.perf_counter() - start < 1.0


def test_train_ppo_rejects_a_config_of_the_wrong_type():
    env = ResetCountingEnv()
    with raises_naming("config", "PPOConfig"):
        train_ppo(env, nnx.Module(), PPOConfig())  # a PPOConfig where a TrainConfig belongs
    assert env.resets == 0
