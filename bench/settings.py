"""Named benchmark presets, shared by the Brax runner and the nnx-ppo side of the benchmark.

Each preset is a read-only mapping with the library-neutral keys that
:func:`bench.brax_runner.run_brax_ppo` accepts (see :class:`bench.brax_runner.BraxPPOSettings`
for every key's meaning and its Brax counterpart). Derive variants without mutating a preset::

    short = {**SPEED, "total_steps": 300_000, "num_evals": 3}

Env steps are counted as Brax counts them: one step of one env (``action_repeat`` = 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

SPEED: Mapping[str, Any] = MappingProxyType(
    {
        # Throughput comparison at nnx-ppo's default PPOConfig: 256 envs x 20 steps per
        # update (5,120 env steps), 4 epochs x 4 minibatches of 64 envs x 20 steps.
        "env": "CartpoleBalance",
        "episode_length": 1000,
        "n_envs": 256,
        "rollout_length": 20,
        "n_minibatches": 4,
        "n_epochs": 4,
        "batch_size": 64,  # 64 * 4 == 256 == n_envs: one rollout per update.
        "policy_hidden": (64, 64),
        "value_hidden": (256, 256),
        "normalize_observations": True,
        "learning_rate": 1e-4,
        "discounting": 0.99,
        "gae_lambda": 0.95,
        "clipping_epsilon": 0.2,  # nnx-ppo's clip_range default (Brax's own default is 0.3).
        "entropy_cost": 0.0,
        "reward_scaling": 1.0,
        # 1,000 updates in num_evals - 1 = 5 epochs of 200 updates (1,024,000 env steps);
        # the 4 epochs after the compiling first one are timed.
        "total_steps": 5_120_000,
        "num_evals": 6,
        "num_eval_envs": 128,
        "seed": 0,
    }
)
"""Speed preset: compare steady-state env steps/s and compile time under equal settings."""

PLAYGROUND_LIKE: Mapping[str, Any] = MappingProxyType(
    {
        # Playground's dm_control_suite Brax PPO config (2048 envs, batch 1024 x 32
        # minibatches, 16 epochs) scaled to a 2-core CPU: 128 envs, and each update uses
        # 16 consecutive rollouts of 30 steps from every env (61,440 env steps), split into
        # 16 minibatches of 128 trajectories x 30 steps, for 8 epochs.
        "env": "CartpoleBalance",
        "episode_length": 1000,
        "n_envs": 128,
        "rollout_length": 30,
        "n_minibatches": 16,
        "n_epochs": 8,
        "batch_size": 128,  # 128 * 16 == 2048 == 16 rollouts x 128 envs.
        "policy_hidden": (32, 32, 32, 32),
        "value_hidden": (256, 256),
        "normalize_observations": True,
        "learning_rate": 1e-3,
        "discounting": 0.995,
        "gae_lambda": 0.95,
        "clipping_epsilon": 0.3,
        "entropy_cost": 1e-2,
        "reward_scaling": 10.0,
        # Brax reference on this CPU: eval reward 900 after 3-15M steps, 180-400 s.
        # Brax rounds up to whole updates: 20 epochs x 17 updates x 61,440 = 20,889,600 steps.
        "total_steps": 20_000_000,
        "num_evals": 21,
        "num_eval_envs": 128,
        "seed": 0,
    }
)
"""Learning preset: Playground-like hyperparameters; compare eval reward against wall time."""

NNX_CARTPOLE: Mapping[str, Any] = MappingProxyType(
    {
        # nnx_ppo.presets.PRESETS["CartpoleBalance"], expressed in these settings' terms.
        **SPEED,
        "n_envs": 512,
        "rollout_length": 32,
        "n_minibatches": 8,
        "batch_size": 64,
        "n_epochs": 4,
        "policy_hidden": (32, 32),
        "value_hidden": (64, 64),
        "learning_rate": 1e-3,
        "discounting": 0.995,
        "entropy_cost": 1e-2,
        "anneal_learning_rate": True,
        "total_steps": 10_000_000,
        "num_evals": 41,
        "num_eval_envs": 64,
    }
)
"""Learning preset for nnx-ppo on CartpoleBalance: the defaults we ship for it."""

PLAYGROUND_GPU: Mapping[str, Any] = MappingProxyType(
    {
        # Playground's dm_control_suite PPO config for CartpoleBalance on one GPU: 2048 envs,
        # unroll 30, 32 minibatches, 16 epochs, lr 1e-3, discount 0.995, reward scaling 10,
        # entropy 1e-2, clipping 0.3, policy 4x32, value 5x256. One rollout per update (our
        # minibatches split the env axis): 32 minibatches of 64 envs x 30 steps.
        **PLAYGROUND_LIKE,
        "n_envs": 2048,
        "n_minibatches": 32,
        "n_epochs": 16,
        "batch_size": 64,
        "value_hidden": (256, 256, 256, 256, 256),
        "total_steps": 20_000_000,
        "num_evals": 11,
        "num_eval_envs": 128,
    }
)
"""GPU preset: Playground's published CartpoleBalance settings (``bench/gpu_check.sh``)."""

PRESETS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "speed": SPEED,
        "playground_like": PLAYGROUND_LIKE,
        "nnx_cartpole": NNX_CARTPOLE,
        "playground_gpu": PLAYGROUND_GPU,
    }
)
"""Presets by the name the command lines accept."""

LEARNING_TABLE_ENVS: tuple[str, ...] = (
    "CartpoleSwingup",
    "PendulumSwingup",
    "ReacherEasy",
    "FingerSpin",
    "AcrobotSwingup",
)
"""The five DM Control envs of the learning table (``bench.learning_cells``)."""

LEARNING_TABLE: Mapping[str, Any] = MappingProxyType(
    {
        # Playground's dm_control_suite brax_ppo_config (mujoco_playground 0.2.0) with the SGD
        # cost per env step cut ~10x for a 2-core CPU; identical for both libraries.
        # Cut: 2048 -> 256 envs; 16 unrolls per update -> 1 (batch_size 1024 -> 32 trajectories
        # per minibatch, 32 -> 8 minibatches): one update is 256 envs x 30 steps = 7,680 env
        # steps, in 8 minibatches of 32 envs x 30 steps; 16 -> 4 passes; value 5x256 -> 2x256.
        # SGD per env step (CartpoleSwingup, 5 observations): 4 passes x (policy 4x32 +
        # value 2x256 = 70k multiply-adds a sample forward) x 3 (forward and backward) x 2
        # FLOP ~= 1.7 MFLOP, against Playground's 16 x 267k x 3 x 2 ~= 26 MFLOP (~15x).
        # As Playground's: unroll 30, policy 4x32, lr 1e-3, discount 0.995 (FingerSpin 0.95,
        # see LEARNING_TABLE_DISCOUNTING), GAE lambda 0.95, clipping 0.3, entropy 1e-2,
        # reward scaling 10, observation normalisation, episode length 1000, no gradient clip.
        # Not as Playground's: num_resets_per_eval 0 (nnx-ppo resets only finished envs, so
        # Brax does the same), 64 eval episodes (Playground 128: halves the eval cost), and
        # the budget: 5M steps (Playground 60M, AcrobotSwingup 100M) with an eval every
        # 33 updates = 253,440 steps (20 epochs: 20 x 33 x 7,680 = 5,068,800 steps).
        "episode_length": 1000,
        "n_envs": 256,
        "rollout_length": 30,
        "n_minibatches": 8,
        "batch_size": 32,  # 32 * 8 == 256 == n_envs: one rollout per update.
        "n_epochs": 4,
        "policy_hidden": (32, 32, 32, 32),
        "value_hidden": (256, 256),
        "normalize_observations": True,
        "learning_rate": 1e-3,
        "discounting": 0.995,
        "gae_lambda": 0.95,
        "clipping_epsilon": 0.3,
        "entropy_cost": 1e-2,
        "reward_scaling": 10.0,
        "max_grad_norm": None,
        "vf_loss_coefficient": 0.5,
        "num_resets_per_eval": 0,
        "total_steps": 20 * 33 * 7_680,
        "num_evals": 21,
        "num_eval_envs": 64,
    }
)
"""Learning-table preset: the settings both libraries share, per env from
:func:`learning_table_settings` (which adds ``env``, ``seed`` and the env's discount)."""

LEARNING_TABLE_DISCOUNTING: Mapping[str, float] = MappingProxyType({"FingerSpin": 0.95})
"""Playground's per-env discount where it is not the suite's 0.995."""


def learning_table_settings(env: str, seed: int) -> dict[str, Any]:
    """The learning table's settings for one (env, seed): the same for both libraries.

    Raises:
        ValueError: If ``env`` is not one of :data:`LEARNING_TABLE_ENVS` or ``seed`` < 0.
    """
    if env not in LEARNING_TABLE_ENVS:
        raise ValueError(f"env {env!r} is not in the learning table {LEARNING_TABLE_ENVS}")
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed ({seed!r}) must be a non-negative int")
    discounting = LEARNING_TABLE_DISCOUNTING.get(env, LEARNING_TABLE["discounting"])
    return {**LEARNING_TABLE, "env": env, "seed": seed, "discounting": discounting}
