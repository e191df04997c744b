"""``server.spec.preset_fill`` on its own (pure JSON): what a spec takes from a preset."""

from __future__ import annotations

from typing import Any

from server.spec.preset_fill import fill, follow_total

# A preset answer as spec_check.preset_answer gives it (trimmed to a few fields).
ANSWER: dict[str, Any] = {
    "env": "WalkerWalk",
    "variant": "cpu",
    "source": "playground",
    "spec": {
        "env": {"name": "WalkerWalk", "overrides": {"episode_length": 1000}},
        "network": {"kind": "mlp", "actor_hidden_sizes": [32, 32], "activation": "swish"},
        "config": {
            "ppo": {"n_envs": 256, "total_steps": 60_000_000},
            "eval": {"every_steps": 6_666_667, "n_envs": 64, "max_episode_length": 1000},
            "seed": 17,
            "checkpoint_every_steps": 6_666_667,
        },
    },
}


def test_a_ppo_spec_takes_every_left_out_field_and_its_cadences_follow_its_total() -> None:
    spec = {
        "kind": "ppo",
        "env": {"name": "WalkerWalk", "overrides": {"impl": "jax"}},
        "network": {"kind": "mlp", "actor_hidden_sizes": [8]},
        "config": {"ppo": {"total_steps": 5_000_000}, "checkpoint_every_steps": 1000},
    }
    out = fill(spec, {"actor_hidden_sizes"}, ANSWER)
    assert out["env"]["overrides"] == {"impl": "jax", "episode_length": 1000}
    assert out["network"] == {"kind": "mlp", "actor_hidden_sizes": [8], "activation": "swish"}
    assert out["config"]["ppo"] == {"total_steps": 5_000_000, "n_envs": 256}
    # 9 evaluations over 60M (60M / 6,666,667 = 9.0) -> over 5M: ceil(5M / 9) = 555,556;
    # the checkpoint cadence was set: kept.
    assert out["config"]["eval"]["every_steps"] == 555_556
    assert out["config"]["checkpoint_every_steps"] == 1000
    assert out["preset"] == {
        "name": "WalkerWalk",
        "variant": "cpu",
        "source": "playground",
        "filled": [
            "config.eval.every_steps",
            "config.eval.max_episode_length",
            "config.eval.n_envs",
            "config.ppo.n_envs",
            "config.seed",
            "env.overrides.episode_length",
            "network.activation",
            "network.kind",
        ],
    }
    assert spec["config"] == {"ppo": {"total_steps": 5_000_000}, "checkpoint_every_steps": 1000}


def test_env_randomize_comes_from_the_preset_unless_the_spec_sets_it() -> None:
    answer = {**ANSWER, "spec": {**ANSWER["spec"], "env": {"name": "Go1", "randomize": True}}}
    for kind in ("ppo", "distillation"):
        out = fill({"kind": kind, "env": {"name": "Go1"}}, set(), answer)
        assert out["env"]["randomize"] is True and "env.randomize" in out["preset"]["filled"]
    for given in (False, True):
        out = fill({"env": {"name": "Go1", "randomize": given}}, set(), answer)
        assert out["env"]["randomize"] is given and "env.randomize" not in out["preset"]["filled"]
    out = fill({"env": {"name": "Go1", "randomize": None}}, set(), answer)  # null: the preset's
    assert out["env"]["randomize"] is True
    assert "randomize" not in fill({"env": {"name": "WalkerWalk"}}, set(), ANSWER)["env"]


def test_another_network_kind_and_a_distillation_spec_take_less() -> None:
    lstm = fill({"env": {"name": "WalkerWalk"}, "network": {"kind": "lstm"}}, {"kind"}, ANSWER)
    assert lstm["network"] == {"kind": "lstm"}
    assert "config.eval.every_steps" in lstm["preset"]["filled"]  # the preset's own total
    assert lstm["config"]["eval"]["every_steps"] == 6_666_667

    spec = {"kind": "distillation", "env": {"name": "WalkerWalk"}, "network": {"kind": "mlp"}}
    out = fill(spec, set(), ANSWER)
    assert out["network"] == {"kind": "mlp"}
    assert out["config"] == {"eval": {"n_envs": 64, "max_episode_length": 1000}}
    assert out["preset"]["filled"] == [
        "config.eval.max_episode_length",
        "config.eval.n_envs",
        "env.overrides.episode_length",
    ]


def test_follow_total_keeps_the_number_of_events() -> None:
    assert follow_total(300_000, 50_000, 200_000) == 33_334  # 6 over 200k
    assert follow_total(300_000, 100_000, 10) == 4  # 3 over 10 steps: ceil(10 / 3)
    assert follow_total(100, 1000, 5000) == 5000  # fewer than one: one, at the end


def test_a_refused_total_leaves_the_cadences_alone() -> None:
    for total in (1e300, -5, 2.5, "many"):
        spec = {"env": {"name": "WalkerWalk"}, "config": {"ppo": {"total_steps": total}}}
        out = fill(spec, set(), ANSWER)
        assert out["config"]["eval"]["every_steps"] == 6_666_667, total
