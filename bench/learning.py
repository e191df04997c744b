"""Learning curves: deterministic eval reward against env steps and wall time, per seed.

::

    python -m bench.learning                            # both libraries, seeds 0 1 2
    python -m bench.learning --library nnx --seeds 0 --total-steps 245760 --num-evals 5

nnx-ppo trains with ``--preset`` (default ``nnx_cartpole``, the settings we ship for
CartpoleBalance) and Brax with ``--brax-preset`` (default ``playground_like``, Playground's
Brax config scaled to this CPU). Every run is a fresh Python process with, by default, a new
empty compilation cache, so wall times include a cold compile. For each run this prints the
first eval at or above ``--threshold`` (env step, and wall seconds from the start of training,
compile included) and the fraction of later evals that stayed at or above it; for nnx-ppo it
prints PASS when every seed reached the threshold within ``--time-limit-s``. Every curve goes
to ``bench/results/learning-<time>.json`` (rewritten after each run).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.brax_config import BraxPPOSettings
from bench.brax_runner import run_brax_ppo_subprocess
from bench.nnx_runner import nnx_settings, run_nnx_ppo_subprocess
from bench.runs import add_run_options, fresh_cache_env, run_overrides, write_results
from bench.settings import PRESETS

RUNNERS: Mapping[str, tuple[str, Callable[..., dict[str, Any]]]] = {
    "nnx": ("nnx_ppo", run_nnx_ppo_subprocess),
    "brax": ("brax", run_brax_ppo_subprocess),
}
"""``--library`` choice -> (library name in results, fresh-process runner)."""


def first_reach(curve: Sequence[Mapping[str, Any]], threshold: float) -> dict[str, Any] | None:
    """The first eval with ``eval_reward >= threshold`` and how well the reward held after.

    Returns:
        None if no eval reached it, else ``{"step", "wall_seconds", "later_evals",
        "later_at_threshold", "later_fraction"}``; ``later_fraction`` is None when the
        reaching eval was the last.
    """
    for i, point in enumerate(curve):
        if point["eval_reward"] >= threshold:
            later = [p["eval_reward"] >= threshold for p in curve[i + 1 :]]
            return {
                "step": point["step"],
                "wall_seconds": point["wall_seconds"],
                "later_evals": len(later),
                "later_at_threshold": sum(later),
                "later_fraction": sum(later) / len(later) if later else None,
            }
    return None


def describe_run(library: str, seed: int, result: Mapping[str, Any], threshold: float) -> str:
    """One line per run: when it first reached the threshold and whether it stayed."""
    curve = result["curve"]
    best = max(curve, key=lambda p: p["eval_reward"])
    tail = (
        f"final {result['final_eval_reward']:.1f} at {curve[-1]['step']:,}; "
        f"{result['env_steps_per_second']:,.0f} env steps/s; "
        f"compile {result['compile_seconds']:.0f} s"
    )
    reach = first_reach(curve, threshold)
    if reach is None:
        return (
            f"{library:8} seed {seed}: never reached {threshold:g} (best {best['eval_reward']:.1f} "
            f"at {best['step']:,}); {tail}"
        )
    if reach["later_fraction"] is None:
        held = "no later evals"
    else:
        held = (
            f"later evals >= {threshold:g}: {reach['later_at_threshold']}/{reach['later_evals']}"
            f" ({reach['later_fraction']:.0%})"
        )
    return (
        f"{library:8} seed {seed}: first >= {threshold:g} at {reach['step']:,} env steps, "
        f"{reach['wall_seconds']:.0f} s (incl. compile); {held}; {tail}"
    )


def verdict(runs: Sequence[Mapping[str, Any]], time_limit_s: float, threshold: float) -> str:
    """Pass/fail: every run reached the threshold within ``time_limit_s`` of wall time."""
    late = [
        r["seed"]
        for r in runs
        if r["reached"] is None or r["reached"]["wall_seconds"] > time_limit_s
    ]
    status = "FAIL" if late else "PASS"
    detail = f" (seeds not in time: {late})" if late else ""
    return (
        f"{status}: reached {threshold:g} within {time_limit_s:g} s wall (incl. compile) for "
        f"{len(runs) - len(late)}/{len(runs)} seeds{detail}"
    )


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", choices=("nnx", "brax", "both"), default="both")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="nnx_cartpole")
    parser.add_argument("--brax-preset", choices=sorted(PRESETS), default="playground_like")
    parser.add_argument("--threshold", type=float, default=900.0)
    parser.add_argument("--time-limit-s", type=float, default=300.0)
    add_run_options(parser, "both presets'")
    return parser.parse_args(argv)


def _settings(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Each chosen library's settings (seed still the preset's), validated up front."""
    overrides = run_overrides(args)
    chosen = ("nnx", "brax") if args.library == "both" else (args.library,)
    settings = {}
    for choice in chosen:
        preset = args.preset if choice == "nnx" else args.brax_preset
        settings[choice] = {**PRESETS[preset], **overrides}
    if "nnx" in settings:
        nnx_settings(settings["nnx"])
    if "brax" in settings:
        BraxPPOSettings.from_mapping(settings["brax"])
    return settings


def main(argv: Sequence[str] | None = None) -> None:
    """Runs every (seed, library), prints one line per run and nnx-ppo's verdict."""
    args = _parse(argv)
    settings = _settings(args)
    payload: dict[str, Any] = {
        "kind": "learning",
        "threshold": args.threshold,
        "time_limit_s": args.time_limit_s,
        "cache": args.cache,
        "presets": {"nnx": args.preset, "brax": args.brax_preset},
        "runs": [],
    }
    path = None
    for seed in args.seeds:
        for choice, base in settings.items():
            library, run = RUNNERS[choice]
            print(f"[learning] {library} seed {seed}", file=sys.stderr, flush=True)
            with fresh_cache_env(args.cache == "fresh") as env:
                result = run({**base, "seed": seed}, timeout_s=args.timeout_s, env=env)
            reached = first_reach(result["curve"], args.threshold)
            payload["runs"].append(
                {"library": library, "seed": seed, "reached": reached, "result": result}
            )
            print(describe_run(library, seed, result, args.threshold), flush=True)
            path = write_results("learning", payload, path)
    ours = [r for r in payload["runs"] if r["library"] == "nnx_ppo"]
    if ours:
        payload["nnx_ppo_verdict"] = verdict(ours, args.time_limit_s, args.threshold)
        path = write_results("learning", payload, path)
        print(f"\nnnx_ppo: {payload['nnx_ppo_verdict']}")
    brax = [r for r in payload["runs"] if r["library"] == "brax"]
    if brax:
        print(f"brax (reference): {verdict(brax, args.time_limit_s, args.threshold)}")
    print(f"\nfull results: {path}")


if __name__ == "__main__":
    main()
