"""bench.precision: the runner takes ``precision``; the learning cells' plot and medians."""

from __future__ import annotations

import json

from bench import nnx_runner, precision
from bench.settings import SPEED


def test_the_runner_takes_precision_as_an_nnx_only_setting():
    cfg = nnx_runner.nnx_settings({**SPEED, "precision": "bfloat16"})
    assert cfg.env == "CartpoleBalance"  # the Brax-side checks ignore it


def cell(env: str, prec: str, seed: int, final: float) -> dict:
    curve = [{"step": 1000, "eval_reward": final / 2}, {"step": 2000, "eval_reward": final}]
    return {
        "settings": {"env": env, "seed": seed},
        "precision": prec,
        "curve": curve,
        "final_eval_reward": final,
    }


def test_plot_draws_each_env_and_takes_median_final_rewards(tmp_path, monkeypatch):
    monkeypatch.setattr(precision, "LEARNING_DIR", tmp_path)
    finals = {"float32": [900.0, 700.0, 800.0], "bfloat16": [850.0, 600.0, 990.0]}
    for prec, values in finals.items():
        for seed, final in enumerate(values):
            path = precision.cell_path("CartpoleBalance", prec, seed)
            path.write_text(json.dumps(cell("CartpoleBalance", prec, seed, final)))
    summary = precision.plot()
    assert summary == {"CartpoleBalance": {"float32": 800.0, "bfloat16": 850.0}}
    assert (tmp_path / "CartpoleBalance.png").stat().st_size > 1000
