"""``bench.physics_bound``: the settings it trains at, and its env-only stepping."""

from __future__ import annotations

from bench import physics_bound
from bench.nnx_runner import nnx_settings
from bench.settings import LEARNING_TABLE


def test_the_table_variant_is_the_learning_tables_settings_for_the_env():
    settings = physics_bound.training_settings("WalkerWalk", 40, "table")
    assert settings["env"] == "WalkerWalk"
    assert settings["total_steps"] == 40 * 256 * 30
    for key in ("n_envs", "rollout_length", "n_minibatches", "n_epochs", "value_hidden"):
        assert settings[key] == LEARNING_TABLE[key]
    nnx_settings(settings)  # settings both runners accept


def test_the_gpu_variant_is_playgrounds_settings_in_whole_updates():
    settings = physics_bound.training_settings("WalkerWalk", 4, "gpu")
    update = settings["n_minibatches"] * settings["batch_size"] * settings["rollout_length"]
    assert (settings["n_envs"], update) == (2048, 983_040)
    assert settings["total_steps"] == 4 * update
    nnx_settings(settings)  # settings both runners accept


def test_env_only_stepping_counts_env_steps_per_second():
    sps = physics_bound.env_only_steps_per_second("CartpoleBalance", n_envs=4, steps=3, repeats=2)
    assert 0 < sps < 1e9
    chunked = physics_bound.env_only_steps_per_second(
        "CartpoleBalance", n_envs=4, steps=3, repeats=2, chunk=2
    )
    assert 0 < chunked < 1e9
