"""Presets: the tuned Cartpole, and Playground's Brax PPO parameters mapped field by field."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nnx_ppo import catalogue
from nnx_ppo.presets import PRESETS, TUNED, playground_preset, preset
from nnx_ppo.presets.playground import brax_ppo_params, cpu_factor, from_brax_params

GO1 = {  # Playground's Go1JoystickFlatTerrain parameters (0.2.0), plus an unknown field
    "action_repeat": 1,
    "batch_size": 256,
    "discounting": 0.97,
    "entropy_cost": 0.01,
    "episode_length": 1000,
    "learning_rate": 0.0003,
    "max_grad_norm": 1.0,
    "network_factory": {
        "policy_hidden_layer_sizes": (512, 256, 128),
        "policy_obs_key": "state",
        "value_hidden_layer_sizes": (512, 256, 128),
        "value_obs_key": "privileged_state",
    },
    "normalize_observations": True,
    "num_envs": 8192,
    "num_evals": 10,
    "num_minibatches": 32,
    "num_resets_per_eval": 10,
    "num_timesteps": 200_000_000,
    "num_updates_per_batch": 4,
    "reward_scaling": 1.0,
    "unroll_length": 20,
    "some_new_field": 3,
}


def test_go1_mapping_gpu_variant():
    p = from_brax_params("Go1JoystickFlatTerrain", GO1, cpu=False)
    ppo = p.config.ppo
    # 256 * 32 = 8192 segments per Brax step = 1 per env: the rollout is one unroll.
    assert (ppo.n_envs, ppo.rollout_length, ppo.n_minibatches, ppo.n_epochs) == (8192, 20, 32, 4)
    assert (ppo.discounting_factor, ppo.learning_rate, ppo.reward_scaling) == (0.97, 3e-4, 1.0)
    assert ppo.clip_range == 0.3  # Brax's default: the config has no clipping_epsilon
    assert ppo.gradient_clipping == 1.0 and ppo.gae_lambda == 0.95
    assert ppo.critic_loss_weight == 0.5 and ppo.total_steps == 200_000_000
    assert not ppo.anneal_learning_rate
    # 10 evals including step 0: every 200M / 9 steps, rounded up.
    assert p.config.eval.every_steps == 22_222_223
    assert p.config.eval.n_envs == 128 and p.config.eval.max_episode_length == 1000
    assert p.env_overrides == {"episode_length": 1000}
    assert p.network == {
        "kind": "mlp",
        "actor_hidden_sizes": (512, 256, 128),
        "critic_hidden_sizes": (512, 256, 128),
        "activation": "swish",
        "normalize_obs": True,
        "entropy_weight": 0.01,
        "policy_obs_key": "state",
        "value_obs_key": "privileged_state",
    }
    unmapped = "\n".join(p.unmapped)
    assert "num_resets_per_eval=10" in unmapped and "some_new_field=3" in unmapped
    assert "GAE" in unmapped and "deterministic" in unmapped
    assert (p.source, p.variant) == ("playground", "gpu")


def test_cpu_variant_keeps_gradient_steps_per_sample():
    gpu = from_brax_params("Go1JoystickFlatTerrain", GO1, cpu=False).config.ppo
    cpu = from_brax_params("Go1JoystickFlatTerrain", GO1, cpu=True).config.ppo
    # 8192 / 256 = 32: envs and minibatches both divided by 32.
    assert (cpu.n_envs, cpu.n_minibatches) == (256, 1)

    def per_sample(ppo):  # gradient steps per env step, and samples per minibatch
        samples = ppo.n_envs * ppo.rollout_length
        return ppo.n_epochs * ppo.n_minibatches / samples, samples / ppo.n_minibatches

    assert per_sample(cpu) == per_sample(gpu)
    assert cpu.rollout_length == gpu.rollout_length and cpu.n_epochs == gpu.n_epochs


def test_dm_control_rollout_spans_the_brax_step():
    params = {
        "action_repeat": 1,
        "batch_size": 1024,
        "discounting": 0.995,
        "entropy_cost": 0.01,
        "episode_length": 1000,
        "learning_rate": 0.001,
        "normalize_observations": True,
        "num_envs": 2048,
        "num_evals": 10,
        "num_minibatches": 32,
        "num_timesteps": 60_000_000,
        "num_updates_per_batch": 16,
        "reward_scaling": 10.0,
        "unroll_length": 30,
        "action_repeat_x": 0,
    }
    params.pop("action_repeat_x")
    p = from_brax_params("CartpoleSwingup", {**params, "action_repeat": 2}, cpu=True)
    ppo = p.config.ppo
    # 1024 * 32 / 2048 = 16 unrolls of 30 per env; CPU: 2048 / 256 = 8 -> 256 envs, 4 mbs.
    assert (ppo.n_envs, ppo.rollout_length, ppo.n_minibatches) == (256, 480, 4)
    assert ppo.reward_scaling == 10.0 and ppo.n_epochs == 16
    # No network_factory: Brax's default sizes; no obs keys.
    assert p.network["actor_hidden_sizes"] == (32, 32, 32, 32)
    assert p.network["critic_hidden_sizes"] == (256,) * 5
    assert "policy_obs_key" not in p.network
    assert p.config.eval.n_envs == 64  # CPU: at most 64 eval episodes
    assert any("action_repeat=2" in u for u in p.unmapped)


def test_cpu_factor_divides_both_counts():
    assert cpu_factor(8192, 32) == 32
    assert cpu_factor(1024, 8) == 4
    assert cpu_factor(2048, 32) == 8
    assert cpu_factor(3000, 6) == 6  # 3000 // 256 = 11; 6 is the largest dividing both
    assert cpu_factor(100, 4) == 1


def test_every_registry_env_has_a_valid_preset_in_both_variants():
    for name in catalogue.PLAYGROUND_FAMILIES:
        params = brax_ppo_params(name)
        for variant in ("cpu", "gpu"):
            p = playground_preset(name, variant)  # the configs validate themselves
            assert p.env == name and p.variant == variant
            assert p.config.ppo.total_steps == params["num_timesteps"]
            assert p.config.ppo.n_envs % p.config.ppo.n_minibatches == 0
            if variant == "cpu":
                assert p.config.ppo.n_envs <= 1024
            else:
                assert p.config.ppo.n_envs == params["num_envs"]
            summary = p.summary()
            assert summary["env"]["name"] == name and summary["network"]["kind"] == "mlp"
            # Playground trains these envs with its domain randomizer; so do the presets.
            assert p.randomize == (name in catalogue.RANDOMIZED_ENVS)
            assert summary["env"]["randomize"] is p.randomize
            assert summary["config"]["ppo"]["n_envs"] == p.config.ppo.n_envs


def test_presets_mapping_serves_every_name_and_keeps_the_tuned_cartpole():
    # Every built-in env and each of Playground's 54, once.
    assert set(PRESETS) == set(catalogue.env_names())
    assert len(PRESETS) == len(catalogue.BUILTIN_ENV_NAMES) + 54
    assert PRESETS["CartpoleBalance"] is TUNED["CartpoleBalance"]
    assert PRESETS["CartpoleBalance"].config.ppo.n_envs == 512
    assert PRESETS.get("NoSuchEnv") is None
    assert PRESETS["PendulumSwingup"].source == "playground"
    assert preset("PointReach").env == "PointReach"
    assert playground_preset("CartpoleBalance", "gpu").config.ppo.n_envs == 2048
    with pytest.raises(ValueError, match="NoSuchEnv"):
        preset("NoSuchEnv")
    with pytest.raises(ValueError, match="variant"):
        preset("PendulumSwingup", "tpu")


def test_a_randomized_preset_gives_playgrounds_randomizer():
    from mujoco_playground import registry

    go1 = playground_preset("Go1JoystickFlatTerrain", "cpu")
    assert go1.randomize and "randomiz" not in " ".join(go1.unmapped)
    assert go1.randomization_fn() is registry.get_domain_randomizer("Go1JoystickFlatTerrain")
    cartpole = playground_preset("CartpoleSwingup", "cpu")
    assert not cartpole.randomize and cartpole.randomization_fn() is None
    assert not preset("PointReach").randomize and not TUNED["CartpoleBalance"].randomize


def test_with_overrides_rescales_minibatches():
    p = playground_preset("CartpoleSwingup", "gpu")  # 2048 envs, 32 minibatches
    small = p.with_overrides(n_envs=64)
    assert (small.config.ppo.n_envs, small.config.ppo.n_minibatches) == (64, 1)
    mid = p.with_overrides(n_envs=96)  # 32 * 96 / 2048 = 1.5 -> 2, divides 96
    assert mid.config.ppo.n_minibatches == 2
    with pytest.raises(ValueError, match="n_minibatches"):
        p.with_overrides(n_envs=96, n_minibatches=5)


def test_importing_presets_does_not_import_playground():
    code = (
        "import sys, nnx_ppo.presets as p; p.PRESETS['CartpoleBalance']; list(p.PRESETS); "
        "assert 'mujoco_playground' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_new_total_moves_the_eval_and_checkpoint_cadences(capsys):
    from nnx_ppo import cli

    # PointMass (PointMass's Playground parameters: 10 evals over 60M, so every
    # ceil(60M / 9) = 6,666,667 steps, checkpoints alike). Over 5M, the same 9 come every
    # ceil(5M / 9) = 555,556 steps.
    p = preset("PointMass", "cpu")
    assert p.config.eval.every_steps == p.config.checkpoint_every_steps == 6_666_667
    short = p.with_overrides(total_steps=5_000_000)
    assert short.config.eval.every_steps == short.config.checkpoint_every_steps == 555_556
    kept = p.with_overrides(total_steps=5_000_000, eval_every_steps=1_000_000)
    assert kept.config.eval.every_steps == 1_000_000  # set explicitly: kept
    assert kept.config.checkpoint_every_steps == 555_556

    # The CLI: --steps, and a dotted ppo.total_steps, unless the cadence is set too.
    # PointReach's preset: 300k steps, evals every 50k (6), checkpoints every 100k (3).
    assert cli.main(["train", "PointReach", "--steps", "90000", "--print-config"]) == 0
    config = json.loads(capsys.readouterr().out)["config"]
    assert (config["eval"]["every_steps"], config["checkpoint_every_steps"]) == (15_000, 30_000)
    args = ["train", "PointReach", "ppo.total_steps=60000", "checkpoint_every_steps=7000"]
    assert cli.main([*args, "--print-config"]) == 0
    config = json.loads(capsys.readouterr().out)["config"]
    assert (config["eval"]["every_steps"], config["checkpoint_every_steps"]) == (10_000, 7_000)
