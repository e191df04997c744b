"""float32 vs bfloat16 networks (``network.precision``): speed side by side, and learning.

Speed: steady env steps/s of nnx-ppo on CartpoleBalance at the SPEED settings
(``bench.settings.SPEED``), each precision in a fresh process, alternating for
``--rounds`` rounds; prints the medians and their ratio and writes
``bench/results/precision-speed-<time>.json``::

    python -m bench.precision speed --rounds 3
    python -m bench.precision speed --rounds 1 --json '{"total_steps": 1024000, "num_evals": 3}'

Learning: f32 and bf16 on the ``nnx_cartpole`` preset (or ``--preset``) for each seed, one
JSON per cell in ``bench/results/precision/<env>-<precision>-seed<seed>.json`` (cells already
there are kept: a long comparison can be resumed), then a PNG of the curves and the median
final rewards::

    python -m bench.precision learning --seeds 0 1 2
    python -m bench.precision learning --learning-table CartpoleSwingup --seeds 0 1 2
    python -m bench.precision plot

``--learning-table ENV`` runs the cells at the learning table's settings for ENV
(``bench.settings.learning_table_settings``) instead of a preset.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.nnx_runner import run_nnx_ppo_subprocess
from bench.runs import RESULTS_DIR, write_results
from bench.settings import LEARNING_TABLE_ENVS, PRESETS, SPEED, learning_table_settings

PRECISIONS = ("float32", "bfloat16")
LEARNING_DIR = RESULTS_DIR / "precision"


def speed(rounds: int, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Each precision's steady env steps/s per round (fresh processes, alternating)."""
    sps: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    for _ in range(rounds):
        for precision in PRECISIONS:
            result = run_nnx_ppo_subprocess({**SPEED, **overrides, "precision": precision})
            sps[precision].append(result["env_steps_per_second"])
            print(f"{precision}: {result['env_steps_per_second']:.0f} env steps/s", flush=True)
    medians = {p: statistics.median(v) for p, v in sps.items()}
    return {
        "settings": {**SPEED, **overrides},
        "env_steps_per_second": sps,
        "median": medians,
        "bf16_over_f32": medians["bfloat16"] / medians["float32"],
    }


def cell_path(env: str, precision: str, seed: int) -> Path:
    return LEARNING_DIR / f"{env}-{precision}-seed{seed}.json"


def learning(
    preset: str, seeds: Sequence[int], overrides: Mapping[str, Any], table_env: str | None = None
) -> None:
    """Runs the missing (precision, seed) cells, one fresh process each: at ``preset``, or
    at the learning table's settings for ``table_env`` where given."""
    LEARNING_DIR.mkdir(parents=True, exist_ok=True)
    if table_env:
        preset = "learning_table"
    for seed in seeds:
        base = learning_table_settings(table_env, seed) if table_env else PRESETS[preset]
        settings = {**base, **overrides}
        for precision in PRECISIONS:
            path = cell_path(settings["env"], precision, seed)
            if path.exists():
                continue
            cell = {**settings, "seed": seed, "precision": precision}
            result = run_nnx_ppo_subprocess(cell)
            write_results("precision", {"preset": preset, **result, "precision": precision}, path)
            print(f"{path.name}: final reward {result['final_eval_reward']:.1f}", flush=True)


def plot(out: Path | None = None) -> dict[str, dict[str, float]]:
    """A PNG of every cell's curve (one colour per precision) per env; returns each env's
    median final reward per precision."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = [json.loads(p.read_text()) for p in sorted(LEARNING_DIR.glob("*-seed*.json"))]
    envs = sorted({c["settings"]["env"] for c in cells})
    summary: dict[str, dict[str, float]] = {}
    for env in envs:
        fig, ax = plt.subplots(figsize=(7, 4))
        finals: dict[str, list[float]] = {p: [] for p in PRECISIONS}
        for cell in (c for c in cells if c["settings"]["env"] == env):
            colour = "tab:blue" if cell["precision"] == "float32" else "tab:orange"
            curve = cell["curve"]
            ax.plot([p["step"] for p in curve], [p["eval_reward"] for p in curve], color=colour)
            finals[cell["precision"]].append(cell["final_eval_reward"])
        summary[env] = {p: statistics.median(v) for p, v in finals.items() if v}
        labels = [f"{p} (median final {summary[env].get(p, float('nan')):.0f})" for p in PRECISIONS]
        for colour, label in zip(("tab:blue", "tab:orange"), labels, strict=True):
            ax.plot([], [], color=colour, label=label)
        title = f"{env}: float32 vs bfloat16 networks"
        ax.set(title=title, xlabel="env steps", ylabel="eval reward")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out or LEARNING_DIR / f"{env}.png", dpi=100)
        plt.close(fig)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("speed", help="steady env steps/s, f32 vs bf16, SPEED settings")
    s.add_argument("--rounds", type=int, default=3)
    s.add_argument("--json", default="{}", help="settings overriding SPEED's")
    learn = sub.add_parser("learning", help="f32 vs bf16 learning cells, one JSON each")
    learn.add_argument("--preset", choices=sorted(PRESETS), default="nnx_cartpole")
    learn.add_argument(
        "--learning-table", choices=LEARNING_TABLE_ENVS, metavar="ENV", help="instead of --preset"
    )
    learn.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    learn.add_argument("--json", default="{}", help="settings overriding the preset's")
    sub.add_parser("plot", help="the PNG and median final rewards of the cells so far")
    args = parser.parse_args(argv)
    if args.command == "speed":
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        result = {"started": started, **speed(args.rounds, json.loads(args.json))}
        path = write_results("precision-speed", result)
        print(json.dumps({k: result[k] for k in ("median", "bf16_over_f32")}), path)
    elif args.command == "learning":
        learning(args.preset, args.seeds, json.loads(args.json), args.learning_table)
        print(json.dumps(plot()))
    else:
        print(json.dumps(plot()))


if __name__ == "__main__":
    main()
