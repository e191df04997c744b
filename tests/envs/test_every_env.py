"""Every env trains from its preset: loaded on the CPU (``impl="jax"``), the preset's
network built, two tiny PPO iterations run with a checkpoint after each, the first
checkpoint restored, trained on from and checkpointed again with exactly the uninterrupted
run's parameters, and one frame rendered where the env renders
(``bench.env_table.check_env``).

The whole list takes long on a CPU (compiling a MuJoCo Playground env's training step
takes minutes there): ``make test-envs`` runs it (``--every-env``). The normal suite runs a
built-in env only, which keeps the check itself tested in seconds.
"""

from __future__ import annotations

import pytest

from bench.env_table import (
    TINY_ITERATIONS,
    TINY_N_ENVS,
    TINY_ROLLOUT,
    check_env,
    default_order,
    tiny_preset,
)
from nnx_ppo import catalogue
from nnx_ppo.presets import TUNED, preset

CHEAP = ["PointReachDict"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "env_name" in metafunc.fixturenames:
        every = metafunc.config.getoption("--every-env")
        names = [n for n in default_order() if catalogue.missing_assets(n) is None]
        metafunc.parametrize("env_name", names if every else CHEAP)


def test_the_env_trains_one_iteration_from_its_preset(env_name: str) -> None:
    row = check_env(env_name)
    assert row["available"] and row["restored"], row
    mapped = catalogue.source_of(env_name) == "playground" and env_name not in TUNED
    assert row["source"] == ("playground" if mapped else "tuned")
    assert row["action_size"] >= 1 and row["iteration_s"] > 0 and row["compile_s"] > 0
    if catalogue.source_of(env_name) == "playground":
        assert row["render"].startswith("ok"), row["render"]


def test_the_tiny_preset_keeps_the_network_and_cuts_the_sizes() -> None:
    tiny, full = tiny_preset("MemoryCue"), preset("MemoryCue", "cpu")
    assert tiny.network == full.network  # the LSTM of the preset, as it is
    ppo = tiny.config.ppo
    assert (ppo.n_envs, ppo.rollout_length) == (TINY_N_ENVS, TINY_ROLLOUT)
    assert ppo.total_steps == TINY_ITERATIONS * TINY_N_ENVS * TINY_ROLLOUT
    assert tiny.config.checkpoint_every_steps == TINY_N_ENVS * TINY_ROLLOUT  # after each
    assert ppo.n_epochs == full.config.ppo.n_epochs
    assert not tiny.config.eval.enabled
