"""nnx-ppo against Brax PPO at equal settings, side by side: what ``make bench`` runs.

::

    python -m bench.compare                      # SPEED preset, 2 rounds (~10-15 min here)
    python -m bench.compare --rounds 1 --total-steps 245760 --num-evals 3   # a quick check
    python -m bench.compare --learning-table ReacherEasy --total-steps 768000 --num-evals 3
    python -m bench.compare --learning-table FingerSpin --nnx-settings '{"env_step_chunk": 32}'

Each run is a fresh Python process, alternating libraries (brax, nnx_ppo, brax, nnx_ppo,
...), so that slow drifts in machine load hit both alike. Each process gets a new, empty
compilation cache (``--cache shared`` reuses ``bench/.cache`` instead), so compile times are
cold compiles. ``--nnx-settings`` adds nnx-ppo-only settings (``bench.nnx_runner``'s
``NNX_ONLY_KEYS``) to our runs alone. Prints a table and writes every run's full result dict to
``bench/results/compare-<time>.json`` (rewritten after each run, so a crash keeps the runs
done so far).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.brax_runner import run_brax_ppo_subprocess
from bench.nnx_runner import NNX_ONLY_KEYS, nnx_settings, run_nnx_ppo_subprocess
from bench.runs import add_run_options, fresh_cache_env, run_overrides, write_results
from bench.settings import LEARNING_TABLE_ENVS, PRESETS, learning_table_settings

RUNNERS: Mapping[str, Callable[..., dict[str, Any]]] = {
    "brax": run_brax_ppo_subprocess,
    "nnx_ppo": run_nnx_ppo_subprocess,
}
"""Library name -> its fresh-process runner, in the order each round runs them."""

RATIO_FLOOR, RATIO_TARGET = 1.0, 1.5
"""nnx/brax steady-state throughput: the floor we must meet and where we want to be."""


def summarize(rounds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per-library medians, nnx/brax ratios and eval rewards at equal env steps.

    Args:
        rounds: ``[{"round": i, "brax": result, "nnx_ppo": result}]`` with both runners'
            result dicts.
    """
    summary: dict[str, Any] = {}
    keys = ("env_steps_per_second", "compile_seconds", "train_compile_seconds", "peak_rss_mb")
    for key in (*keys, "first_metric_seconds"):
        if any(key not in r[lib] for r in rounds for lib in RUNNERS):
            continue  # results from before the runners reported it
        per_lib = {lib: [r[lib][key] for r in rounds] for lib in RUNNERS}
        summary[key] = {
            lib: {"per_round": v, "median": statistics.median(v)} for lib, v in per_lib.items()
        }
    sps = summary["env_steps_per_second"]
    summary["ratio_nnx_over_brax"] = {
        "per_round": [
            r["nnx_ppo"]["env_steps_per_second"] / r["brax"]["env_steps_per_second"] for r in rounds
        ],
        "of_medians": sps["nnx_ppo"]["median"] / sps["brax"]["median"],
    }
    summary["eval_at_equal_steps"] = eval_at_equal_steps(rounds)
    return summary


def eval_at_equal_steps(rounds: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Both libraries' eval rewards at Brax's eval steps, one row per step.

    Brax evaluates at step 0 and after each epoch; nnx-ppo after the iteration that passes
    each multiple of ``eval.every_steps``. Each Brax step is paired with nnx-ppo's nearest
    eval within half an eval interval (the steps are equal when ``total_steps`` is a
    multiple of ``(num_evals - 1) * steps_per_update``); ``nnx_step`` says which.
    """
    brax_steps = [p["step"] for p in rounds[0]["brax"]["curve"]]
    gaps = [b - a for a, b in itertools.pairwise(brax_steps)]
    tolerance = min(gaps) / 2 if gaps else 0
    rows = []
    for i, step in enumerate(brax_steps):
        row: dict[str, Any] = {"step": step, "brax": [], "nnx_step": None, "nnx_ppo": []}
        for r in rounds:
            row["brax"].append(r["brax"]["curve"][i]["eval_reward"])
            ours = min(r["nnx_ppo"]["curve"], key=lambda p: abs(p["step"] - step))
            if abs(ours["step"] - step) <= tolerance:
                row["nnx_step"] = ours["step"]
                row["nnx_ppo"].append(ours["eval_reward"])
        rows.append(row)
    return rows


def format_report(settings: Mapping[str, Any], summary: Mapping[str, Any], n: int) -> str:
    """The printed table: throughput, ratio, compile, memory, rewards at equal steps."""
    s = settings
    lines = [
        f"nnx-ppo vs Brax PPO on {s['env']} ({s['physics_impl']}): {s['n_envs']} envs x "
        f"{s['rollout_length']} steps, {s['n_minibatches']} minibatches x {s['n_epochs']} "
        "epochs,",
        f"  policy {list(s['policy_hidden'])}, value {list(s['value_hidden'])}, "
        f"normalize_observations={s['normalize_observations']}; "
        f"{s['total_steps']:,} env steps; {n} round(s)",
        "",
    ]
    table = [["", "brax", "nnx_ppo", "nnx/brax"]]
    sps, ratio = summary["env_steps_per_second"], summary["ratio_nnx_over_brax"]
    for i in range(n):
        table.append(
            [
                f"env steps/s, round {i + 1}",
                f"{sps['brax']['per_round'][i]:,.0f}",
                f"{sps['nnx_ppo']['per_round'][i]:,.0f}",
                f"{ratio['per_round'][i]:.2f}",
            ]
        )
    table.append(
        [
            "env steps/s, median",
            f"{sps['brax']['median']:,.0f}",
            f"{sps['nnx_ppo']['median']:,.0f}",
            f"{ratio['of_medians']:.2f}",
        ]
    )
    for key, label, fmt in (
        ("first_metric_seconds", "s to the first training metric, median", "{:.1f}"),
        ("compile_seconds", "compile s (start-up), median", "{:.1f}"),
        ("train_compile_seconds", "compile s (train step), median", "{:.1f}"),
        ("peak_rss_mb", "peak RSS MiB, median", "{:,.0f}"),
    ):
        if key not in summary:
            continue
        b, o = summary[key]["brax"]["median"], summary[key]["nnx_ppo"]["median"]
        table.append([label, fmt.format(b), fmt.format(o), f"{o / b:.2f}"])
    lines += _columns(table)
    r = ratio["of_medians"]
    verdict = "met" if r >= RATIO_FLOOR else "NOT met"
    lines += [
        "",
        f"throughput ratio nnx/brax (of medians): {r:.2f}; floor {RATIO_FLOOR} {verdict}, "
        f"target {RATIO_TARGET} {'met' if r >= RATIO_TARGET else 'not met'}",
        "",
        "eval episode reward (deterministic policy) at equal env steps, per round:",
    ]
    rewards = [["env step", "brax", "nnx_ppo step", "nnx_ppo"]]
    for row in summary["eval_at_equal_steps"]:
        rewards.append(
            [
                f"{row['step']:,}",
                " ".join(f"{x:.1f}" for x in row["brax"]),
                "-" if row["nnx_step"] is None else f"{row['nnx_step']:,}",
                " ".join(f"{x:.1f}" for x in row["nnx_ppo"]) or "-",
            ]
        )
    return "\n".join(lines + _columns(rewards))


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligns the first column and right-aligns the others."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="speed")
    parser.add_argument(
        "--learning-table",
        choices=LEARNING_TABLE_ENVS,
        metavar="ENV",
        help="the learning table's settings for ENV (seed 0) instead of --preset",
    )
    parser.add_argument("--rounds", type=int, default=2, help="brax + nnx_ppo pairs to run")
    parser.add_argument(
        "--nnx-settings",
        type=json.loads,
        default={},
        metavar="JSON",
        help=f"nnx-ppo-only settings for our runs, keys among {list(NNX_ONLY_KEYS)}",
    )
    add_run_options(parser, "the preset's")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    extra = args.nnx_settings
    if not isinstance(extra, dict) or set(extra) - set(NNX_ONLY_KEYS):
        parser.error(f"--nnx-settings takes an object with keys among {list(NNX_ONLY_KEYS)}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Runs the rounds, prints the table and the results file's path."""
    args = _parse(argv)
    base = PRESETS[args.preset]
    if args.learning_table:
        base = learning_table_settings(args.learning_table, 0)
    settings = {**base, **run_overrides(args)}
    ours = {**settings, **args.nnx_settings}
    nnx_settings(ours)  # fail on settings either side rejects, before any run
    payload: dict[str, Any] = {
        "kind": "compare",
        "preset": f"learning_table:{args.learning_table}" if args.learning_table else args.preset,
        "cache": args.cache,
        "settings": json.loads(json.dumps(settings)),
        "nnx_settings": args.nnx_settings,
        "rounds": [],
    }
    path = None
    for i in range(args.rounds):
        entry: dict[str, Any] = {"round": i + 1}
        payload["rounds"].append(entry)
        for library, run in RUNNERS.items():
            print(f"[compare] round {i + 1}/{args.rounds}: {library}", file=sys.stderr, flush=True)
            with fresh_cache_env(args.cache == "fresh") as env:
                own = ours if library == "nnx_ppo" else settings
                entry[library] = run(own, timeout_s=args.timeout_s, env=env)
            path = write_results("compare", payload, path)
    payload["summary"] = summarize(payload["rounds"])
    path = write_results("compare", payload, path)
    print(format_report(payload["rounds"][0]["brax"]["settings"], payload["summary"], args.rounds))
    print(f"\nfull results: {path}")


if __name__ == "__main__":
    main()
