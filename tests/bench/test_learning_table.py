"""The learning table: shared settings, cell order, resuming, and the report on fake cells."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.brax_config import BraxPPOSettings
from bench.learning_cells import Cell, cell_order, exclusive, pending, run_pending, write_cell
from bench.learning_report import curve_band, load_cells, summarize_env, write_report
from bench.nnx_runner import nnx_settings, train_config
from bench.settings import LEARNING_TABLE_ENVS, learning_table_settings

ROOT = Path(__file__).resolve().parents[2]


def test_settings_are_playgrounds_with_the_sgd_cut_and_equal_for_both_libraries() -> None:
    from nnx_ppo.presets.playground import brax_ppo_params

    for env in LEARNING_TABLE_ENVS:
        settings = learning_table_settings(env, seed=2)
        playground = brax_ppo_params(env)
        # Kept from Playground's own parameters for this env.
        for ours, theirs in [
            ("rollout_length", "unroll_length"),
            ("discounting", "discounting"),
            ("learning_rate", "learning_rate"),
            ("entropy_cost", "entropy_cost"),
            ("reward_scaling", "reward_scaling"),
            ("episode_length", "episode_length"),
            ("normalize_observations", "normalize_observations"),
        ]:
            assert settings[ours] == playground[theirs], (env, ours)
        brax = BraxPPOSettings.from_mapping(settings)
        ours = train_config(nnx_settings(settings))
        # Cut: 256 envs x 30 steps = 7,680 env steps an update, 8 minibatches of 32 envs,
        # 4 passes; 20 epochs of 33 updates = 5,068,800 steps, an eval every 253,440.
        assert brax.steps_per_update == 7_680 == ours.ppo.n_envs * ours.ppo.rollout_length
        assert (ours.ppo.n_minibatches, ours.ppo.n_epochs, brax.n_epochs) == (8, 4, 4)
        assert brax.value_hidden == (256, 256) and brax.policy_hidden == (32,) * 4
        assert brax.updates_per_epoch == 33 and brax.total_steps == 5_068_800
        assert ours.eval.every_steps == 253_440 and ours.seed == brax.seed == 2
    assert learning_table_settings("FingerSpin", 0)["discounting"] == 0.95


def test_bad_env_or_seed_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="WalkerWalk"):
        learning_table_settings("WalkerWalk", 0)
    with pytest.raises(ValueError, match="seed"):
        learning_table_settings("FingerSpin", -1)


def test_seed_zero_of_every_env_for_both_libraries_comes_first() -> None:
    cells = cell_order()
    assert len(cells) == 30 and len(set(cells)) == 30
    first = cells[:10]
    assert {c.seed for c in first} == {0}
    assert {(c.env, c.library) for c in first} == {
        (e, lib) for e in LEARNING_TABLE_ENVS for lib in ("nnx_ppo", "brax")
    }
    # Libraries alternate who goes first from env to env.
    assert [c.library for c in cells[:4]] == ["nnx_ppo", "brax", "brax", "nnx_ppo"]
    with pytest.raises(ValueError, match="Humanoid"):
        cell_order(envs=["Humanoid"])


def _result(curve: list[tuple[int, float, float]]) -> dict:
    points = [{"step": s, "wall_seconds": w, "eval_reward": r} for s, w, r in curve]
    return {
        "curve": points,
        "final_eval_reward": points[-1]["eval_reward"],
        "total_seconds": points[-1]["wall_seconds"] + 1.0,
    }


def _fake_runner(calls: list[tuple[str, int]], library: str):
    def run(settings: dict) -> dict:
        calls.append((settings["env"], settings["seed"]))
        if settings["seed"] == 1 and library == "brax":
            raise subprocess.CalledProcessError(1, "brax")
        return _result([(253_440, 10.0, 1.0 + settings["seed"]), (506_880, 20.0, 2.0)])

    return run


def test_a_rerun_skips_finished_cells_and_retries_failed_ones(tmp_path: Path) -> None:
    cells = cell_order(envs=["FingerSpin"], seeds=[0, 1])
    calls: dict[str, list] = {"nnx_ppo": [], "brax": []}
    runners = {lib: _fake_runner(calls[lib], lib) for lib in calls}
    report = run_pending(cells, runners, tmp_path, log=lambda _: None)
    assert report["done"] == [
        "FingerSpin-nnx_ppo-seed0",
        "FingerSpin-brax-seed0",
        "FingerSpin-nnx_ppo-seed1",
    ]
    assert report["failed"] == ["FingerSpin-brax-seed1"]
    payload = json.loads(Cell("FingerSpin", "brax", 0).path(tmp_path).read_text())
    settings = json.loads(json.dumps(learning_table_settings("FingerSpin", 0)))
    assert payload["settings"] == settings
    assert len(payload["load_before"]) == 3 and payload["result"]["final_eval_reward"] == 2.0
    # Only the failed cell is left, and only it runs again.
    assert pending(cells, tmp_path) == [Cell("FingerSpin", "brax", 1)]
    again = run_pending(cells, runners, tmp_path, log=lambda _: None)
    assert again["skipped"] == report["done"] and again["failed"] == ["FingerSpin-brax-seed1"]
    assert calls["nnx_ppo"] == [("FingerSpin", 0), ("FingerSpin", 1)]


def test_a_second_runner_is_refused_while_one_holds_the_lock(tmp_path: Path) -> None:
    script = (
        "import sys, pathlib; from bench.learning_cells import exclusive\n"
        "with exclusive(pathlib.Path(sys.argv[1])): pass\n"
    )
    with exclusive(tmp_path):
        done = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": _pythonpath()},
        )
    assert done.returncode != 0 and "another learning-table runner" in done.stderr
    with exclusive(tmp_path):  # free again once the holder left
        pass


def _pythonpath() -> str:
    return os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


def _write(tmp_path: Path, env: str, library: str, seed: int, curve: list) -> None:
    cell = Cell(env, library, seed)
    payload = {"kind": "learning-table-cell", "env": env, "library": library, "seed": seed}
    write_cell(cell, payload | {"result": _result(curve)}, tmp_path)


def _fake_table(tmp_path: Path) -> None:
    # Brax finals 100, 200, 300 -> median 200, threshold 0.9 * 200 = 180.
    _write(tmp_path, "ReacherEasy", "brax", 0, [(0, 5, 0.0), (1_000_000, 50, 100.0)])
    _write(tmp_path, "ReacherEasy", "brax", 1, [(0, 5, 0.0), (1_000_000, 40, 200.0)])
    _write(
        tmp_path,
        "ReacherEasy",
        "brax",
        2,
        [(0, 5, 0.0), (500_000, 30, 190.0), (1_000_000, 60, 300.0)],
    )
    # Ours: 150 never reaches 180; 250 at 0.5M (25 s); 400 at 0.5M (20 s).
    _write(tmp_path, "ReacherEasy", "nnx_ppo", 0, [(500_000, 20, 100.0), (1_000_000, 40, 150.0)])
    _write(tmp_path, "ReacherEasy", "nnx_ppo", 1, [(500_000, 25, 250.0), (1_000_000, 45, 250.0)])
    _write(tmp_path, "ReacherEasy", "nnx_ppo", 2, [(500_000, 20, 400.0), (1_000_000, 35, 400.0)])
    _write(tmp_path, "FingerSpin", "nnx_ppo", 0, [(500_000, 20, 7.0), (1_000_000, 40, 9.0)])
    (tmp_path / "not-a-cell.json").write_text('{"kind": "other"}')


def test_summary_medians_thresholds_and_seeds_that_never_reach(tmp_path: Path) -> None:
    _fake_table(tmp_path)
    table = load_cells(tmp_path)
    assert sorted(table) == ["FingerSpin", "ReacherEasy"]
    s = summarize_env(table["ReacherEasy"])
    assert s["final_median"] == {"nnx_ppo": 250.0, "brax": 200.0}
    assert math.isclose(s["threshold"], 180.0)
    # Brax: seed 0 (final 100) never reaches 180, seed 1 at 1M, seed 2 at 0.5M (190 >= 180).
    assert s["steps_to_threshold"]["brax"] == [None, 1_000_000.0, 500_000.0]
    assert s["steps_to_threshold_median"]["brax"] == 1_000_000.0  # median(inf, 1M, 0.5M)
    assert s["seconds_to_threshold"]["nnx_ppo"] == [None, 25.0, 20.0]
    assert s["seconds_to_threshold_median"]["nnx_ppo"] == 25.0  # median(inf, 25, 20)
    # Ours only, no Brax yet: finals but no threshold.
    assert summarize_env(table["FingerSpin"])["threshold"] is None


def test_curve_band_is_median_and_range_over_the_seeds_at_each_step(tmp_path: Path) -> None:
    _fake_table(tmp_path)
    band = curve_band(load_cells(tmp_path)["ReacherEasy"]["brax"])
    assert [p["step"] for p in band] == [0, 500_000, 1_000_000]
    assert band[1] == {"step": 500_000, "median": 190.0, "low": 190.0, "high": 190.0, "n": 1}
    assert band[2] == {"step": 1_000_000, "median": 200.0, "low": 100.0, "high": 300.0, "n": 3}


def test_report_writes_the_table_and_one_png_per_env(tmp_path: Path) -> None:
    _fake_table(tmp_path)
    out = tmp_path / "out"
    md = write_report(tmp_path, out).read_text()
    reacher = next(line for line in md.splitlines() if line.startswith("| ReacherEasy"))
    assert "| 3/3 | 250.0 (150.0, 250.0, 400.0) | 200.0 (100.0, 200.0, 300.0) | 180.0 |" in reacher
    assert "0.50 (never, 0.50, 0.50)" in reacher and "1.00 (never, 1.00, 0.50)" in reacher
    finger = next(line for line in md.splitlines() if line.startswith("| FingerSpin"))
    assert "| 1/0 | 9.0 (9.0) | - | - |" in finger
    for env in ("ReacherEasy", "FingerSpin"):
        png = out / f"learning-table-{env}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"![{env}](learning-table-{env}.png)" in md
