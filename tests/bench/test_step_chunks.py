"""``bench.step_chunks`` (the env-only sweep over chunk sizes) and the ``env_step_chunk``
setting of the bench's runners."""

from __future__ import annotations

import pytest

from bench import compare, step_chunks
from bench.nnx_runner import nnx_settings, settings_train_config
from bench.settings import learning_table_settings


def test_the_sweep_times_every_chunk_size_twice_against_one_batch():
    result = step_chunks.sweep("CartpoleBalance", n_envs=4, chunks=[2], steps=2, repeats=1)
    assert set(result["passes"]) == {"4", "2"}
    assert all(len(values) == 2 and min(values) > 0 for values in result["passes"].values())
    assert result["speedup_over_one_batch"]["4"] == 1.0
    assert result["fastest_chunk"] in (4, 2)


def test_the_sweep_refuses_sizes_that_do_not_divide_the_batch():
    with pytest.raises(ValueError, match=r"chunk sizes \[3\] do not divide --n-envs 4"):
        step_chunks.sweep("CartpoleBalance", n_envs=4, chunks=[2, 3], steps=2, repeats=1)


def test_our_runner_trains_in_the_chunks_the_settings_name():
    settings = {**learning_table_settings("FingerSpin", 0), "env_step_chunk": 32}
    config = settings_train_config(settings, nnx_settings(settings))
    assert config.ppo.env_step_chunk == 32
    plain = learning_table_settings("FingerSpin", 0)
    assert settings_train_config(plain, nnx_settings(plain)).ppo.env_step_chunk is None


def test_compare_takes_only_nnx_only_settings_for_our_runs():
    args = compare._parse(
        ["--learning-table", "FingerSpin", "--nnx-settings", '{"env_step_chunk": 32}']
    )
    assert args.nnx_settings == {"env_step_chunk": 32}
    with pytest.raises(SystemExit):
        compare._parse(["--nnx-settings", '{"batch_size": 32}'])  # a setting Brax has too
    with pytest.raises(SystemExit):
        compare._parse(["--nnx-settings", "[32]"])
