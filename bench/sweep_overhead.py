"""The sweep's own overhead per trial (issue 15): how long a trial slot stays empty because
of the sweep driver, not because of training or the worker.

    python -m bench.sweep_overhead [--trials 8] [--plain 3]

A real ``nnx-ppo serve`` (API, sweep driver, supervisor, one run process per run) on its own
data directory runs, one after another: ``--plain`` plain PointReach runs, then a sweep of
``--trials`` PointReach trials with ``parallel=1`` (so that trial k+1 fills exactly the slot
that trial k left) and an ASHA pruner (halving at each rung; a learning rate of 1e-3 or 1e-6),
so that some trials are pruned. All times are the service's own timestamps of the runs (one clock):

- **(a) slot freed -> next trial queued** = ``created_at`` of trial k+1 - ``finished_at`` of
  trial k, after a trial that succeeded: the driver noticing the end (its tick), telling
  Optuna, asking for the next values and queueing the run. This is the sweep's overhead:
  the rest of the way to ``running`` is the worker claiming a queued run, the same for a
  plain run, which is also reported: **slot freed -> next trial running** minus the plain
  runs' **submit -> running** (``started_at - created_at``).
- **(b) pruned -> slot reused** = the same gap after a trial that ended ``pruned`` (the
  pruner's decision itself is made while the trial runs; the pruned run then stops at its
  next iteration boundary, which is training, not the sweep).

Target: under 1 s each. Writes ``bench/results/sweep-overhead-<time>.json`` with the load.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.runs import REPO_ROOT, write_results
from bench.service_harness import Service, machine_facts, percentiles, point_reach_spec

TARGET_S = 1.0


def trial_spec(total_steps: int) -> dict[str, Any]:
    spec = point_reach_spec(total_steps)
    spec["config"]["eval"]["every_steps"] = total_steps // 10
    spec.pop("name")
    return spec


def plain_submit_to_running(service: Service, spec: dict[str, Any], n: int) -> list[float]:
    """Plain runs, one at a time on an idle worker: submit -> running, by the service's
    timestamps."""
    out = []
    for i in range(n):
        run = service.submit({**spec, "name": f"plain-{i}"})
        done = service.wait_for(run["id"], timeout=900)
        assert done["status"] == "succeeded", done
        out.append(done["started_at"] - done["created_at"])
    return out


def run_sweep(service: Service, spec: dict[str, Any], trials: int) -> dict[str, Any]:
    body = {
        "name": "bench-overhead",
        "spec": spec,
        # The seed varies too: trials with equal values are identical runs (one seed), and
        # ASHA never prunes a tie, so a space of the learning rate alone pruned nothing.
        "space": {
            "config.ppo.learning_rate": {"choice": [1e-3, 1e-6]},
            "config.seed": {"int_uniform": [0, 10_000]},
        },
        "method": "random",
        "max_trials": trials,
        "parallel": 1,
        # ASHA (halving at every rung of 2 evals) prunes about half of the later trials
        # whatever their rewards; a median pruner may prune none of a handful.
        "pruner": {
            "kind": "asha",
            "min_resource": 2 * spec["config"]["eval"]["every_steps"],
            "reduction_factor": 2,
        },
        "seed": 3,
    }
    created = service.client.post("/api/sweeps", json=body, timeout=300)
    if created.status_code != 201:
        raise RuntimeError(f"submit: {created.status_code} {created.text}")
    sweep_id = created.json()["id"]
    deadline = time.monotonic() + 60 * 60
    while time.monotonic() < deadline:
        sweep = service.client.get(f"/api/sweeps/{sweep_id}").json()
        if sweep["status"] not in ("running", "cancelling"):
            return dict(sweep)
        time.sleep(1.0)
    raise TimeoutError(f"sweep {sweep_id} did not finish:\n{service.log()}")


def gaps(service: Service, sweep: dict[str, Any]) -> list[dict[str, Any]]:
    """For each trial after the first: the previous trial's end, its own queue and start."""
    runs = [service.run(t["run_id"]) for t in sorted(sweep["trials"], key=lambda t: t["trial"])]
    out = []
    for previous, run in itertools.pairwise(runs):
        out.append(
            {
                "trial": run["trial"],
                "previous_status": previous["status"],
                "freed_to_queued_s": run["created_at"] - previous["finished_at"],
                "freed_to_running_s": run["started_at"] - previous["finished_at"],
                "queued_to_running_s": run["started_at"] - run["created_at"],
            }
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--plain", type=int, default=3)
    parser.add_argument("--total-steps", type=int, default=4_000)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)

    before = machine_facts()
    started = time.time()
    spec = trial_spec(args.total_steps)
    cache = REPO_ROOT / "bench" / ".cache" / "jax"
    with (
        tempfile.TemporaryDirectory(prefix="sweep-overhead-") as tmp,
        Service(Path(tmp) / "data", jax_cache=cache) as service,
    ):
        plain = plain_submit_to_running(service, spec, args.plain)
        sweep = run_sweep(service, spec, args.trials)
        rows = gaps(service, sweep)
    plain_median = statistics.median(plain)
    after_success = [r for r in rows if r["previous_status"] == "succeeded"]
    after_pruned = [r for r in rows if r["previous_status"] == "pruned"]
    result = {
        "benchmark": "sweep-overhead",
        "command": "python -m bench.sweep_overhead " + " ".join(argv),
        "machine_before": before,
        "machine_after": machine_facts(),
        "wall_seconds": time.time() - started,
        "sweep_status": sweep["status"],
        "trial_statuses": [t["status"] for t in sweep["trials"]],
        "plain_submit_to_running_s": percentiles(plain),
        "a_freed_to_queued_s": percentiles([r["freed_to_queued_s"] for r in after_success]),
        "a_freed_to_running_minus_plain_s": percentiles(
            [r["freed_to_running_s"] - plain_median for r in after_success]
        ),
        "b_pruned_to_queued_s": percentiles([r["freed_to_queued_s"] for r in after_pruned]),
        "b_pruned_to_running_minus_plain_s": percentiles(
            [r["freed_to_running_s"] - plain_median for r in after_pruned]
        ),
        "trial_queued_to_running_s": percentiles([r["queued_to_running_s"] for r in rows]),
        "gaps": rows,
        "target_s": TARGET_S,
    }
    path = write_results("sweep-overhead", result)
    for key in ("a_freed_to_queued_s", "b_pruned_to_queued_s", "plain_submit_to_running_s"):
        figures = result[key]
        print(f"{key}: p50 {figures.get('p50')} max {figures.get('max')} (n={figures['n']})")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
