"""The ``nnx-ppo`` command line: listing envs, and clear errors instead of stack traces."""

from __future__ import annotations

from nnx_ppo.cli import main
from nnx_ppo.progress import StepRate


def test_envs_lists_builtin_and_playground_envs(capsys):
    assert main(["envs"]) == 0
    names = capsys.readouterr().out.split()
    assert {"PointReach", "MemoryCue", "CartpoleBalance"} <= set(names)


def test_unknown_preset_is_a_clear_error(capsys):
    assert main(["train", "--preset", "NoSuchPreset"]) == 2
    err = capsys.readouterr().err
    assert "NoSuchPreset" in err and "CartpoleBalance" in err


def test_invalid_step_count_is_a_clear_error(capsys, tmp_path):
    assert main(["train", "--steps", "0", "--cache-dir", str(tmp_path)]) == 2
    assert "total_steps" in capsys.readouterr().err


def test_train_shows_a_progress_bar_and_the_evaluations(capsys, tmp_path, monkeypatch):
    # PointReach's preset: 64 envs x 16 steps = 1,024 per iteration; 4,096 steps are 4
    # iterations in one jitted call, evaluated once at the end.
    monkeypatch.setenv("COLUMNS", "200")
    assert (
        main(["train", "--preset", "PointReach", "--steps", "4096", "--cache-dir", str(tmp_path)])
        == 0
    )
    out = capsys.readouterr().out
    assert "training" in out and "4,096/4,096 steps" in out  # the finished bar
    assert "steps/s" not in out  # one burst of logs: no rate to show, rather than a wrong one
    (line,) = [line for line in out.splitlines() if "eval/episode_reward" in line]
    assert line.split()[1] == "4096"


def test_the_rate_counts_one_point_per_burst_of_logs():
    rate = StepRate(min_interval_s=0.05)
    for step, wall_time in ((1000, 10.0), (2000, 10.001), (3000, 12.0), (4000, 12.001)):
        rate.add(wall_time, step)
    assert rate.per_second() == 1000.0  # (3000 - 1000) / (12 - 10)
