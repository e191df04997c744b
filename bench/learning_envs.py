"""Learning against Brax on one Playground env, both from the env's Playground parameters.

::

    python -m bench.learning_envs --env CartpoleSwingup --steps 2000000 --seeds 3
    python -m bench.learning_envs --env FingerSpin --steps 500000 --seeds 1 --num-evals 3

Both sides train with the settings of ``nnx_ppo.presets.preset(env, "cpu")`` (Playground's
``brax_ppo_config(env)`` with ``num_envs`` and ``num_minibatches`` divided for this CPU):
:func:`playground_settings` turns the preset back into one settings dict of
:class:`bench.brax_config.BraxPPOSettings` keys, which :mod:`bench.brax_runner` hands to
Brax 0.14.2's ``ppo.train`` and :mod:`bench.nnx_runner` to ``train_ppo``. Equal env steps:
the budget is rounded to whole Brax epochs, and both evaluate the deterministic policy at the
end of each (Brax also at step 0). Not carried over to either side (so that both do the same):
Playground's ``num_resets_per_eval`` (Brax gets 0; we only reset finished envs).

Each (seed, library) run is a fresh process sharing the warm compilation cache in
``bench/.cache``; per seed the two libraries alternate which goes first, so a change in the
machine's load hits both alike; ``uptime``'s load averages are recorded around each run.
Results, with every curve (wall seconds per eval), go to
``bench/results/learning-<env>-<time>.json``; the summary compares the median final eval
reward and the median wall time to 90% of Brax's median final reward.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from bench.brax_runner import run_brax_ppo_subprocess
from bench.nnx_runner import nnx_settings, run_nnx_ppo_subprocess
from bench.runs import write_results

REACH_FRACTION = 0.9
"""Our time is measured to this fraction of Brax's median final reward."""


def playground_settings(
    env: str, steps: int, num_evals: int, variant: str = "cpu"
) -> dict[str, Any]:
    """The benchmark settings of ``env``'s ``variant`` preset, at about ``steps`` env steps.

    ``variant`` ``"gpu"`` is Playground's own parameters (2048 envs, 32 minibatches);
    ``"cpu"`` divides both for this CPU (:mod:`nnx_ppo.presets.playground`).

    ``steps`` is rounded to ``num_evals - 1`` epochs of whole updates (at least one each), so
    that Brax runs exactly ``total_steps`` and evaluates where we do.

    Raises:
        ValueError: If ``env`` has no Playground preset, or its parameters use an action
            repeat (neither runner repeats actions).
    """
    from nnx_ppo import presets
    from nnx_ppo.presets.playground import brax_ppo_params

    preset = presets.preset(env, variant)
    if preset.source != "playground":
        raise ValueError(f"{env!r} has no Playground preset (source {preset.source!r})")
    params = brax_ppo_params(env)
    if params.get("action_repeat", 1) != 1:
        raise ValueError(f"{env}: action_repeat {params['action_repeat']} is not supported")
    ppo, network = preset.config.ppo, preset.network
    unroll = int(params["unroll_length"])
    rollouts_per_update = ppo.rollout_length // unroll
    steps_per_update = ppo.n_envs * ppo.rollout_length
    epochs = num_evals - 1
    updates_per_epoch = max(1, round(steps / (epochs * steps_per_update)))
    return {
        "env": env,
        "episode_length": int(preset.env_overrides["episode_length"]),
        "n_envs": ppo.n_envs,
        "rollout_length": unroll,
        "n_minibatches": ppo.n_minibatches,
        "batch_size": rollouts_per_update * ppo.n_envs // ppo.n_minibatches,
        "n_epochs": ppo.n_epochs,
        "policy_hidden": tuple(network["actor_hidden_sizes"]),
        "value_hidden": tuple(network["critic_hidden_sizes"]),
        "normalize_observations": bool(network["normalize_obs"]),
        "learning_rate": ppo.learning_rate,
        "discounting": ppo.discounting_factor,
        "gae_lambda": ppo.gae_lambda,
        "clipping_epsilon": ppo.clip_range,
        "entropy_cost": float(network["entropy_weight"]),
        "reward_scaling": ppo.reward_scaling,
        "max_grad_norm": ppo.gradient_clipping,
        "vf_loss_coefficient": ppo.critic_loss_weight,
        "total_steps": epochs * updates_per_epoch * steps_per_update,
        "num_evals": num_evals,
        "num_eval_envs": preset.config.eval.n_envs,
        "seed": 0,
    }


def time_to_reach(curve: Sequence[Mapping[str, Any]], threshold: float) -> float | None:
    """Wall seconds (compile included) of the first eval with reward >= ``threshold``."""
    for point in curve:
        if point["eval_reward"] >= threshold:
            return float(point["wall_seconds"])
    return None


def summarize(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per library: median final reward, and median wall time to 90% of Brax's median final.

    A seed that never reaches it counts as infinitely slow (the median then may be ``None``,
    meaning more than half never reached it).
    """
    finals: dict[str, list[float]] = {"nnx_ppo": [], "brax": []}
    for run in runs:
        finals[run["library"]].append(run["result"]["final_eval_reward"])
    if not finals["brax"]:
        return {"final_median": {k: _median(v) for k, v in finals.items()}}
    threshold = REACH_FRACTION * statistics.median(finals["brax"])
    reach: dict[str, list[float | None]] = {"nnx_ppo": [], "brax": []}
    for run in runs:
        reach[run["library"]].append(time_to_reach(run["result"]["curve"], threshold))
    return {
        "final_median": {k: _median(v) for k, v in finals.items()},
        "finals": finals,
        "threshold": threshold,
        "seconds_to_threshold": reach,
        "seconds_to_threshold_median": {k: _median_or_none(v) for k, v in reach.items()},
        "env_steps_per_second_median": {
            lib: _median([r["result"]["env_steps_per_second"] for r in runs if r["library"] == lib])
            for lib in finals
        },
    }


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _median_or_none(values: Sequence[float | None]) -> float | None:
    if not values:
        return None
    middle = statistics.median(math.inf if v is None else v for v in values)
    return None if math.isinf(middle) else middle


def load_average() -> list[float]:
    """``uptime``'s 1, 5 and 15 minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", required=True, help="a MuJoCo Playground env, e.g. FingerSpin")
    parser.add_argument("--steps", type=int, required=True, help="env steps per run (rounded)")
    parser.add_argument("--seeds", type=int, default=3, help="this many seeds")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds start here")
    parser.add_argument("--num-evals", type=int, default=6, help="evals, Brax's step 0 included")
    parser.add_argument("--library", choices=("nnx", "brax", "both"), default="both")
    parser.add_argument("--timeout-s", type=float, help="kill a run after this many seconds")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Runs every (seed, library), printing one line per run, then the summary."""
    args = _parse(argv)
    settings = playground_settings(args.env, args.steps, args.num_evals)
    nnx_settings(settings)  # validated before anything runs
    runners = {"nnx_ppo": run_nnx_ppo_subprocess, "brax": run_brax_ppo_subprocess}
    order = {"both": ["nnx_ppo", "brax"], "nnx": ["nnx_ppo"], "brax": ["brax"]}[args.library]
    payload: dict[str, Any] = {"kind": "learning-envs", "settings": settings, "runs": []}
    path = None
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for library in order if seed % 2 == 0 else order[::-1]:
            print(f"[learning] {args.env} {library} seed {seed}", file=sys.stderr, flush=True)
            load_before = load_average()
            run = runners[library]
            result = run({**settings, "seed": seed}, timeout_s=args.timeout_s)
            payload["runs"].append(
                {
                    "library": library,
                    "seed": seed,
                    "load_before": load_before,
                    "load_after": load_average(),
                    "result": result,
                }
            )
            print(
                f"{library:8} seed {seed}: final {result['final_eval_reward']:.1f} at "
                f"{result['total_steps']:,} steps, {result['total_seconds']:.0f} s, "
                f"{result['env_steps_per_second']:,.0f} steps/s, "
                f"compile {result['compile_seconds']:.0f} s; load {load_average()}",
                flush=True,
            )
            path = write_results(f"learning-{args.env}", payload, path)
    payload["summary"] = summarize(payload["runs"])
    path = write_results(f"learning-{args.env}", payload, path)
    print(payload["summary"])
    print(f"full results: {path}")


if __name__ == "__main__":
    main()
