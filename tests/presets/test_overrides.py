"""Dotted overrides of a preset and the preset's JSON form (``nnx_ppo.presets.overrides``)."""

from __future__ import annotations

import pytest

from nnx_ppo.algorithms.types import LoggingLevel
from nnx_ppo.presets import preset
from nnx_ppo.presets.overrides import OverrideError, apply, from_json, parse_assignment, to_json


def test_assignments_read_their_value_as_json_else_as_a_string():
    assert parse_assignment("ppo.learning_rate=3e-4") == ("ppo.learning_rate", 3e-4)
    assert parse_assignment("network.actor_hidden_sizes=[64, 64]")[1] == [64, 64]
    assert parse_assignment("ppo.gradient_clipping=null")[1] is None
    assert parse_assignment("network.activation=relu")[1] == "relu"
    with pytest.raises(OverrideError, match="KEY=VALUE"):
        parse_assignment("ppo.learning_rate")


def test_overrides_set_config_network_and_env_fields():
    base = preset("PointReach")
    out = apply(
        base,
        [
            ("ppo.learning_rate", 3e-4),
            ("ppo.n_epochs", 2),
            ("eval.logging_level", "LOSSES|THROUGHPUT"),
            ("seed", 5),
            ("network.actor_hidden_sizes", [16, 16]),
            ("env.episode_length", 50),
        ],
    )
    assert out.config.ppo.learning_rate == 3e-4 and out.config.ppo.n_epochs == 2
    assert out.config.eval.logging_level == LoggingLevel.LOSSES | LoggingLevel.THROUGHPUT
    assert out.config.seed == 5
    assert out.network["actor_hidden_sizes"] == [16, 16]
    assert out.env_overrides == {"episode_length": 50}
    # Everything else is the preset's.
    assert out.config.ppo.n_envs == base.config.ppo.n_envs
    assert out.config.eval.every_steps == base.config.eval.every_steps
    assert base.config.ppo.learning_rate == 1e-3  # the preset itself is unchanged


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("ppo.learning_rat", 1e-3, "unknown field 'ppo.learning_rat'"),
        ("ppo.learning_rate", "fast", "ppo.learning_rate='fast': must be a number"),
        ("ppo.n_envs", 2.5, "ppo.n_envs=2.5: must be an integer"),
        ("ppo.n_envs", 33, "ppo.n_envs (33) must be divisible by ppo.n_minibatches (4)"),
        ("network.width", 3, "unknown network field network.width"),
        ("network.kind", "gru", "network.kind must be 'mlp' or 'lstm'"),
        ("optimizer", 1, "unknown override key 'optimizer'"),
    ],
)
def test_a_bad_override_names_its_key_and_value(key, value, message):
    with pytest.raises(OverrideError) as error:
        apply(preset("PointReach"), [(key, value)])
    assert message in str(error.value)


def test_the_json_form_reads_back_to_the_same_preset():
    original = apply(preset("PointReachEnergy"), [("eval.logging_percentiles", None)])
    again = from_json(to_json(original))
    assert again.config == original.config
    assert again.env == original.env and again.env_overrides == original.env_overrides
    assert list(again.network["reward_streams"]) == ["energy", "task"]


def test_env_randomize_switches_the_domain_randomizer():
    go1 = preset("Go1JoystickFlatTerrain", "cpu")
    assert go1.randomize  # Playground's default for Go1
    off = apply(go1, [("env.randomize", False)])
    assert not off.randomize and off.env_overrides == go1.env_overrides  # not a config key
    assert to_json(off)["env"]["randomize"] is False
    assert from_json(to_json(off)).randomize is False
    assert from_json(to_json(go1)).randomize is True
    assert from_json({"env": {"name": "Go1JoystickFlatTerrain"}}).randomize is False
    with pytest.raises(OverrideError, match="'PointReach' has no domain randomizer"):
        apply(preset("PointReach"), [("env.randomize", True)])
    with pytest.raises(OverrideError, match="must be true or false, got 'yes'"):
        apply(go1, [("env.randomize", "yes")])
    with pytest.raises(OverrideError, match="'CartpoleBalance' has no domain randomizer"):
        from_json({"env": {"name": "CartpoleBalance", "randomize": True}})
    with pytest.raises(OverrideError, match="unknown env field"):
        from_json({"env": {"name": "PointReach", "randomise": True}})


def test_a_bad_preset_json_names_the_field():
    with pytest.raises(OverrideError, match=r"ppo\.n_envs must be a positive integer, got -1"):
        from_json({"env": {"name": "PointReach"}, "config": {"ppo": {"n_envs": -1}}})
    with pytest.raises(OverrideError, match=r"unknown field 'eval\.every'"):
        from_json({"env": {"name": "PointReach"}, "config": {"eval": {"every": 1}}})
    with pytest.raises(OverrideError, match="env must be an object"):
        from_json({"network": {}})
