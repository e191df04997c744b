"""The five-env learning bench: settings from the Playground preset, and its summary."""

from __future__ import annotations

import dataclasses
import math

from bench.brax_config import BraxPPOSettings
from bench.learning_envs import playground_settings, summarize, time_to_reach
from bench.nnx_runner import nnx_settings, train_config
from nnx_ppo import presets


def test_settings_give_both_sides_the_cpu_preset() -> None:
    settings = playground_settings("FingerSpin", 1_000_000, num_evals=6)
    brax = BraxPPOSettings.from_mapping(settings)
    # CPU preset: 256 envs, 4 minibatches, rollout 480 = 16 unrolls of 30. Brax gets
    # unroll 30 and batch 16 * 256 / 4 = 1024: one update is 1024 * 4 * 30 = 122,880 steps,
    # as one of our iterations (256 x 480).
    assert (brax.rollout_length, brax.resolved_batch_size) == (30, 1024)
    assert brax.steps_per_update == 256 * 480
    # 1M steps over 5 epochs: round(1e6 / (5 * 122,880)) = 2 updates each, 1,228,800 steps.
    assert settings["total_steps"] == 5 * 2 * 122_880
    assert brax.updates_per_epoch == 2
    ours = train_config(nnx_settings(settings))
    shipped = presets.preset("FingerSpin", "cpu").config
    differs = {k for k, v in dataclasses.asdict(ours.ppo).items() if v != getattr(shipped.ppo, k)}
    assert differs == {"total_steps", "logging_level"}
    assert ours.eval.every_steps == 2 * 122_880  # one eval per Brax epoch
    assert ours.eval.n_envs == shipped.eval.n_envs == brax.num_eval_envs
    assert settings["discounting"] == 0.95  # FingerSpin's own, not the suite's 0.995


def test_time_to_reach_is_the_first_eval_at_the_threshold() -> None:
    curve = [
        {"step": 0, "wall_seconds": 5.0, "eval_reward": 10.0},
        {"step": 1, "wall_seconds": 9.0, "eval_reward": 95.0},
        {"step": 2, "wall_seconds": 12.0, "eval_reward": 80.0},
    ]
    assert time_to_reach(curve, 90.0) == 9.0
    assert time_to_reach(curve, 96.0) is None


def _run(library: str, final: float, reach_at: float | None) -> dict:
    curve = [{"step": 1, "wall_seconds": 1.0, "eval_reward": 0.0}]
    if reach_at is not None:
        curve.append({"step": 2, "wall_seconds": reach_at, "eval_reward": final})
    curve.append({"step": 3, "wall_seconds": 100.0, "eval_reward": final})
    return {
        "library": library,
        "result": {"final_eval_reward": final, "curve": curve, "env_steps_per_second": 1.0},
    }


def test_summary_medians_and_seeds_that_never_reach() -> None:
    runs = [
        _run("brax", 100.0, 50.0),
        _run("brax", 200.0, 40.0),
        _run("brax", 300.0, 30.0),
        _run("nnx_ppo", 150.0, 20.0),
        _run("nnx_ppo", 50.0, None),
        _run("nnx_ppo", 250.0, 10.0),
    ]
    summary = summarize(runs)
    assert summary["final_median"] == {"nnx_ppo": 150.0, "brax": 200.0}
    assert math.isclose(summary["threshold"], 180.0)  # 0.9 * Brax's median 200
    # Brax: the 100 seed never reaches 180 (its last point is 100); 40 and 30 do.
    # Median of (inf, 40, 30) = 40. Ours: 150 and 50 never do, so the median is inf.
    assert summary["seconds_to_threshold"]["brax"] == [None, 40.0, 30.0]
    assert summary["seconds_to_threshold_median"] == {"nnx_ppo": None, "brax": 40.0}
