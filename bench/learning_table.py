"""The table of ``bench.learning_envs`` results: ours against Brax, one row per env.

::

    python -m bench.learning_table bench/results/learning-*-2026*.json

Runs of one env from several files (e.g. seeds run in separate passes) are pooled when
their settings agree; files of another kind are skipped.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.learning_envs import summarize


def pool(paths: Sequence[Path]) -> dict[str, dict[str, Any]]:
    """``{env: {"settings", "runs"}}`` from ``learning-envs`` result files.

    Raises:
        ValueError: If two files of one env used different settings.
    """
    pooled: dict[str, dict[str, Any]] = {}
    for path in paths:
        payload = json.loads(path.read_text())
        if payload.get("kind") != "learning-envs":
            continue
        env = payload["settings"]["env"]
        entry = pooled.setdefault(env, {"settings": payload["settings"], "runs": []})
        if entry["settings"] != payload["settings"]:
            raise ValueError(f"{path}: {env} settings differ from an earlier file's")
        entry["runs"].extend(payload["runs"])
    return pooled


def _fmt(value: float | None, spec: str) -> str:
    return "never" if value is None else format(value, spec)


def row(env: str, entry: Mapping[str, Any]) -> str:
    """One markdown row: steps, seeds, final medians, time to 90% of Brax's, steps/s, load."""
    runs = entry["runs"]
    summary = summarize(runs)
    final, reach = summary["final_median"], summary.get("seconds_to_threshold_median", {})
    sps = summary.get("env_steps_per_second_median", {})
    seeds = {lib: sum(r["library"] == lib for r in runs) for lib in ("nnx_ppo", "brax")}
    compile_s = {
        lib: [round(r["result"]["compile_seconds"]) for r in runs if r["library"] == lib]
        for lib in ("nnx_ppo", "brax")
    }
    loads = [r["load_before"][0] for r in runs] + [r["load_after"][0] for r in runs]
    return (
        f"| {env} | {entry['settings']['total_steps']:,} | {seeds['nnx_ppo']}/{seeds['brax']} | "
        f"{_fmt(final.get('nnx_ppo'), '.1f')} | {_fmt(final.get('brax'), '.1f')} | "
        f"{_fmt(reach.get('nnx_ppo'), '.0f')} | {_fmt(reach.get('brax'), '.0f')} | "
        f"{_fmt(sps.get('nnx_ppo'), ',.0f')} / {_fmt(sps.get('brax'), ',.0f')} | "
        f"{compile_s['nnx_ppo']} / {compile_s['brax']} | {min(loads):.1f}-{max(loads):.1f} |"
    )


HEADER = (
    "| env | env steps | seeds (ours/Brax) | final, ours (median) | final, Brax (median) | "
    "s to 90% of Brax's final, ours | same, Brax | env steps/s ours / Brax | "
    "start-up s (compile) ours / Brax | load (1 min) |\n"
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    print(HEADER)
    for env, entry in pool(args.files).items():
        print(row(env, entry))


if __name__ == "__main__":
    main()
