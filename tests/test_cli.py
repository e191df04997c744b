"""The ``nnx-ppo`` command line: listing envs, and clear errors instead of stack traces."""

from __future__ import annotations

import json

import pytest

from nnx_ppo import catalogue
from nnx_ppo.cli import main
from nnx_ppo.progress import StepRate


def test_envs_lists_builtin_and_playground_envs(capsys):
    assert main(["envs"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == catalogue.env_names()


def test_envs_marks_the_envs_whose_menagerie_assets_are_missing(capsys, tmp_path, monkeypatch):
    (tmp_path / "unitree_go1").mkdir()  # a stand-in Menagerie with only Go1's folder
    monkeypatch.setenv(catalogue.MENAGERIE_ENV_VAR, str(tmp_path))
    assert main(["envs"]) == 0
    captured = capsys.readouterr()
    lines = {line.split()[0]: line for line in captured.out.splitlines()}
    assert lines["Go1Getup"].split()[1:] == ["playground", "available"]
    assert lines["PointReach"].split()[1:] == ["builtin", "available"]
    assert lines["CartpoleBalance"].endswith("available")
    spot = lines["SpotGetup"]
    assert "UNAVAILABLE" in spot and str(tmp_path / "boston_dynamics_spot") in spot
    unavailable = sum("UNAVAILABLE" in line for line in lines.values())
    assert unavailable == len(catalogue.MENAGERIE_ASSETS) - 5  # Go1's five envs load
    assert f"{len(lines)} envs, {len(lines) - unavailable} available" in captured.err
    # The fix is said once, not on each of the unavailable envs' lines.
    assert (captured.out + captured.err).count(catalogue.menagerie_fix()) == 1
    assert catalogue.MENAGERIE_ENV_VAR not in captured.out


def test_envs_lists_all_54_available_with_the_menagerie_extra(capsys, monkeypatch):
    monkeypatch.delenv(catalogue.MENAGERIE_ENV_VAR, raising=False)  # no configuration at all
    assert main(["envs"]) == 0
    captured = capsys.readouterr()
    assert "UNAVAILABLE" not in captured.out
    playground = [line for line in captured.out.splitlines() if line.split()[1] == "playground"]
    assert len(playground) == 54
    assert f"{len(catalogue.env_names())} envs, {len(catalogue.env_names())} available" in (
        captured.err
    )


def test_train_prints_the_resolved_preset_with_overrides(capsys):
    argv = ["train", "PointReach", "--n-envs", "32", "ppo.learning_rate=3e-4", "seed=3"]
    assert main([*argv, "network.actor_hidden_sizes=[8,8]", "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["env"] == {"name": "PointReach", "overrides": {}, "randomize": False}
    ppo = printed["config"]["ppo"]
    # --n-envs 32 halves the preset's 64 envs and so its 4 minibatches.
    assert (ppo["n_envs"], ppo["n_minibatches"], ppo["learning_rate"]) == (32, 2, 3e-4)
    assert printed["config"]["seed"] == 3
    assert printed["network"]["actor_hidden_sizes"] == [8, 8]


def test_train_reads_a_printed_preset_back_and_overrides_it(capsys, tmp_path):
    assert main(["train", "MemoryCue", "--print-config"]) == 0
    path = tmp_path / "preset.json"
    path.write_text(capsys.readouterr().out)
    assert main(["train", "--config", str(path), "ppo.n_epochs=2", "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["env"]["name"] == "MemoryCue" and printed["network"]["kind"] == "lstm"
    assert printed["config"]["ppo"]["n_epochs"] == 2
    assert main(["train", "--config", str(tmp_path / "missing.json")]) == 2
    assert "cannot read --config" in capsys.readouterr().err


def test_bad_overrides_are_one_line_naming_the_key(capsys):
    cases = {
        "ppo.learning_rat=1": "unknown field 'ppo.learning_rat'",
        "ppo.learning_rate=fast": "ppo.learning_rate='fast': must be a number",
        "network.depth=3": "unknown network field network.depth",
        "nonsense=1": "unknown override key 'nonsense'",
    }
    for item, message in cases.items():
        assert main(["train", "PointReach", item, "--print-config"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and "Traceback" not in err
        assert err.count("\n") == 1


def test_unknown_preset_is_a_clear_error(capsys):
    assert main(["train", "--preset", "NoSuchPreset"]) == 2
    err = capsys.readouterr().err
    assert "NoSuchPreset" in err and "CartpoleBalance" in err and "did you mean" not in err
    assert main(["train", "cartpolebalanse", "--print-config"]) == 2
    assert "'cartpolebalanse' (did you mean 'CartpoleBalance' or" in capsys.readouterr().err


def test_a_misspelt_env_name_gets_a_suggestion():
    from nnx_ppo import envs

    with pytest.raises(ValueError, match=r"'PointReech' \(did you mean 'PointReach'"):
        envs.load("PointReech")


def test_invalid_step_count_is_a_clear_error(capsys, tmp_path):
    assert main(["train", "--steps", "0", "--cache-dir", str(tmp_path)]) == 2
    assert "total_steps" in capsys.readouterr().err


def test_train_shows_a_progress_bar_and_the_evaluations(capsys, tmp_path, monkeypatch):
    # PointReach's preset: 64 envs x 16 steps = 1,024 per iteration; 4,096 steps are 4
    # iterations in two jitted calls (one, then three), evaluated once at the end (set:
    # --steps alone would keep the preset's 6 evaluations over the run). A rate, where one
    # is shown, spans whole calls (test_the_rate_counts_one_point_per_burst_of_logs).
    monkeypatch.setenv("COLUMNS", "200")
    result = tmp_path / "result.json"
    argv = ["train", "PointReach", "--steps", "4096", "eval.every_steps=4096", "--seed", "2"]
    argv += ["--json", str(result)]
    assert main([*argv, "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "training" in out and "4,096/4,096 steps" in out  # the finished bar
    (line,) = [line for line in out.splitlines() if "eval/episode_reward" in line]
    assert line.split()[1] == "4096"
    written = json.loads(result.read_text())
    assert (written["env"], written["seed"], written["total_steps"]) == ("PointReach", 2, 4096)
    assert written["preset"]["config"]["ppo"]["total_steps"] == 4096
    (evaluation,) = written["eval_history"]
    assert evaluation["step"] == 4096 and 0 < evaluation["wall_s"] <= written["wall_s"]
    assert f"{evaluation['eval/episode_reward']:8.2f}" in line


def test_the_rate_counts_one_point_per_burst_of_logs():
    rate = StepRate(min_interval_s=0.05)
    for step, wall_time in ((1000, 10.0), (2000, 10.001), (3000, 12.0), (4000, 12.001)):
        rate.add(wall_time, step)
    assert rate.per_second() == 1000.0  # (3000 - 1000) / (12 - 10)


def test_a_seed_override_trains_with_that_seed(capsys, tmp_path):
    # `seed=N` was parsed into the config but training used --seed's default (0): seed=3
    # and seed=5 trained the same run and --json said seed 0. 1,024 steps are one
    # iteration of PointReach's preset (64 envs x 16 steps), evaluated at its end.
    rewards = {}
    for seed in (3, 5):
        result = tmp_path / f"seed{seed}.json"
        argv = ["train", "PointReach", "--steps", "1024", f"seed={seed}", "--json", str(result)]
        assert main([*argv, "--cache-dir", str(tmp_path)]) == 0
        written = json.loads(result.read_text())
        assert written["seed"] == seed and written["preset"]["config"]["seed"] == seed
        rewards[seed] = written["eval_history"][-1]["eval/episode_reward"]
    capsys.readouterr()
    assert rewards[3] != rewards[5], rewards
    assert main(["train", "PointReach", "--seed", "3", "seed=5", "--print-config"]) == 2
    assert "give the seed once" in capsys.readouterr().err
    assert main(["train", "PointReach", "--seed", "4", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["seed"] == 4
