"""The ``nnx-ppo`` command line: listing envs, and clear errors instead of stack traces."""

from __future__ import annotations

from nnx_ppo.cli import main


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
