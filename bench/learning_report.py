"""The learning table from its cell files: one markdown table and one PNG of curves per env.

::

    python -m bench.learning_report          # bench/results/learning-table/*.json ->
                                             #   bench/results/learning-table.md and
                                             #   bench/results/learning-table-<env>.png

Works on a partial table (any subset of the cells of :mod:`bench.learning_cells`): each
row says how many seeds it rests on. Per env and library:

* the final eval reward (deterministic policy, the last curve point): median over seeds and
  every seed's value (the spread; "every seed learns where Brax's do" is read from it);
* the threshold, 90% of Brax's median final reward, and for each library the env steps and
  the wall seconds (from the start of training, network init, compile and evals
  included) of the first eval at or above it: median over seeds, a seed that never
  reaches it counting as infinitely slow ("never" when more than half never do), and the
  per-seed values;
* the curves: median and range (min to max) of the eval reward over seeds at each eval step,
  both libraries on the same axes (Brax's step-0 eval included).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.learning_cells import KIND, LIBRARIES, TABLE_DIR
from bench.runs import RESULTS_DIR

REACH_FRACTION = 0.9
"""Steps and time are measured to this fraction of Brax's median final reward."""
LABELS = {"nnx_ppo": "nnx-ppo (ours)", "brax": "Brax"}


def load_cells(directory: Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """``{env: {library: [cell payload, ...] sorted by seed}}`` from ``directory``'s files.

    Files that are not cell files (another ``kind``, unreadable JSON) are skipped.
    """
    table: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for path in sorted(directory.glob("*.json")):
        try:
            payload = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
        if not isinstance(payload, dict) or payload.get("kind") != KIND:
            continue
        by_library = table.setdefault(payload["env"], {lib: [] for lib in LIBRARIES})
        by_library.setdefault(payload["library"], []).append(payload)
    for by_library in table.values():
        for cells in by_library.values():
            cells.sort(key=lambda c: c["seed"])
    return table


def first_reach(curve: Sequence[Mapping[str, Any]], threshold: float) -> Mapping[str, Any] | None:
    """The first curve point with ``eval_reward >= threshold``, or None."""
    return next((p for p in curve if p["eval_reward"] >= threshold), None)


def median_or_never(values: Sequence[float | None]) -> float | None:
    """Median with None as +infinity; None if that median is infinite (or no values)."""
    if not values:
        return None
    middle = statistics.median(math.inf if v is None else v for v in values)
    return None if math.isinf(middle) else middle


def summarize_env(by_library: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """One env's numbers (see the module docstring); ``threshold`` is None without Brax."""
    finals = {
        lib: [c["result"]["final_eval_reward"] for c in by_library.get(lib, [])]
        for lib in LIBRARIES
    }
    out: dict[str, Any] = {
        "seeds": {lib: [c["seed"] for c in by_library.get(lib, [])] for lib in LIBRARIES},
        "finals": finals,
        "final_median": {lib: _median(v) for lib, v in finals.items()},
        "cell_seconds": {
            lib: [c["result"]["total_seconds"] for c in by_library.get(lib, [])]
            for lib in LIBRARIES
        },
        "threshold": None,
    }
    if not finals["brax"]:
        return out
    threshold = REACH_FRACTION * statistics.median(finals["brax"])
    steps: dict[str, list[float | None]] = {}
    seconds: dict[str, list[float | None]] = {}
    for lib in LIBRARIES:
        reached = [first_reach(c["result"]["curve"], threshold) for c in by_library.get(lib, [])]
        steps[lib] = [None if p is None else float(p["step"]) for p in reached]
        seconds[lib] = [None if p is None else float(p["wall_seconds"]) for p in reached]
    out.update(
        threshold=threshold,
        steps_to_threshold=steps,
        seconds_to_threshold=seconds,
        steps_to_threshold_median={lib: median_or_never(v) for lib, v in steps.items()},
        seconds_to_threshold_median={lib: median_or_never(v) for lib, v in seconds.items()},
    )
    return out


def curve_band(cells: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    """Per eval step: median, min and max eval reward over the seeds that reached that step.

    Returns:
        ``[{"step", "median", "low", "high", "n"}]`` sorted by step.
    """
    by_step: dict[int, list[float]] = {}
    for cell in cells:
        for point in cell["result"]["curve"]:
            by_step.setdefault(int(point["step"]), []).append(float(point["eval_reward"]))
    return [
        {
            "step": step,
            "median": statistics.median(rewards),
            "low": min(rewards),
            "high": max(rewards),
            "n": len(rewards),
        }
        for step, rewards in sorted(by_step.items())
    ]


def plot_env(env: str, by_library: Mapping[str, Sequence[Mapping[str, Any]]], path: Path) -> None:
    """Writes ``path`` (PNG): both libraries' median curve and min-max band over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for lib, color in zip(LIBRARIES, ("tab:blue", "tab:orange"), strict=True):
        cells = by_library.get(lib, [])
        band = curve_band(cells)
        if not band:
            continue
        steps = [p["step"] / 1e6 for p in band]
        label = f"{LABELS[lib]}, median of {len(cells)} seed{'s' * (len(cells) != 1)}"
        ax.plot(steps, [p["median"] for p in band], color=color, label=label)
        ax.fill_between(
            steps, [p["low"] for p in band], [p["high"] for p in band], color=color, alpha=0.2
        )
    ax.set_title(f"{env}: deterministic eval reward (band: min-max over seeds)")
    ax.set_xlabel("env steps (millions)")
    ax.set_ylabel("episode reward")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _num(value: float | None, spec: str) -> str:
    return "never" if value is None else format(value, spec)


def _seeds(values: Sequence[float | None], spec: str) -> str:
    return ", ".join(_num(v, spec) for v in values) or "-"


HEADER = (
    "| env | seeds ours/Brax | final reward, ours: median (seeds) | Brax: median (seeds) | "
    "90% of Brax's final | env steps (M) to it, ours: median (seeds) | Brax | "
    "wall s to it, ours: median (seeds) | Brax | cell wall s ours / Brax (median) |\n"
    "| --- | --- | --- | --- | ---: | --- | --- | --- | --- | --- |"
)


def row(env: str, s: Mapping[str, Any]) -> str:
    """One markdown row of :func:`summarize_env`'s numbers."""
    seeds = f"{len(s['seeds']['nnx_ppo'])}/{len(s['seeds']['brax'])}"
    finals = [
        f"{_num(s['final_median'][lib], '.1f')} ({_seeds(s['finals'][lib], '.1f')})"
        if s["finals"][lib]
        else "-"
        for lib in LIBRARIES
    ]
    cell_s = " / ".join(
        _num(_median(s["cell_seconds"][lib]), ".0f") if s["cell_seconds"][lib] else "-"
        for lib in LIBRARIES
    )
    if s["threshold"] is None:
        return f"| {env} | {seeds} | {finals[0]} | {finals[1]} | - | - | - | - | - | {cell_s} |"
    steps = [
        f"{_num(_mega(s['steps_to_threshold_median'][lib]), '.2f')} "
        f"({_seeds([_mega(v) for v in s['steps_to_threshold'][lib]], '.2f')})"
        for lib in LIBRARIES
    ]
    wall = [
        f"{_num(s['seconds_to_threshold_median'][lib], '.0f')} "
        f"({_seeds(s['seconds_to_threshold'][lib], '.0f')})"
        for lib in LIBRARIES
    ]
    return (
        f"| {env} | {seeds} | {finals[0]} | {finals[1]} | {s['threshold']:.1f} | "
        f"{steps[0]} | {steps[1]} | {wall[0]} | {wall[1]} | {cell_s} |"
    )


def _mega(value: float | None) -> float | None:
    return None if value is None else value / 1e6


def write_report(directory: Path, out_dir: Path) -> Path:
    """Writes ``learning-table.md`` and one ``learning-table-<env>.png`` per env to ``out_dir``.

    Returns:
        The markdown file's path.
    """
    table = load_cells(directory)
    lines = [
        "# Learning table: nnx-ppo against Brax PPO",
        "",
        "Settings: `bench.settings.LEARNING_TABLE` (the same for both libraries); cells: "
        f"`{_relative(directory)}`; made by `python -m bench.learning_report`. A seed that "
        "never reaches 90% of Brax's median final reward counts as infinitely slow; "
        '"never" means more than half the seeds never reached it.',
        "",
        HEADER,
    ]
    lines += [row(env, summarize_env(table[env])) for env in sorted(table)]
    lines.append("")
    out_dir.mkdir(parents=True, exist_ok=True)
    for env in sorted(table):
        png = out_dir / f"learning-table-{env}.png"
        plot_env(env, table[env], png)
        lines.append(f"![{env}]({png.name})")
    path = out_dir / "learning-table.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(RESULTS_DIR.parents[1]))
    except ValueError:
        return str(path)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=TABLE_DIR, help="the cell files")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="where md and PNGs go")
    args = parser.parse_args(argv)
    print(write_report(args.dir, args.out))


if __name__ == "__main__":
    main()
