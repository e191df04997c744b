"""The overhead of tracking a training run (issue 25): steady env steps/s of ``train_ppo``
with ``nnx_ppo.track``'s callbacks against the same training without, side by side.

    python -m bench.track_overhead [--env PointReach] [--steps 200000] [--pairs 3]

A real ``nnx-ppo serve --no-worker`` takes the tracked runs' reports. In this process, the
same config trains ``--pairs`` interleaved pairs (plain, tracked; the order alternates from
pair to pair), after one warm-up run that compiles. Steady steps/s of a run are counted
from its first logged iteration to its last (the compile and the start left out); both
arms log every iteration (the plain one to a no-op) and save the same checkpoints (the
plain one to a local folder with ``make_checkpoint_fn``: a run checkpoints either way, so
what is measured is tracking's own part: each checkpoint's archive and upload, the
reports). Target (issue 25): the median ratio
tracked/plain >= 0.98. Writes ``bench/results/track-overhead-<time>.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.runs import write_results
from bench.service_harness import TOKEN, Service, machine_facts

TARGET = 0.98


def _steady_sps(env: Any, spec: dict[str, Any], tracked_url: str | None) -> float:
    from nnx_ppo import track
    from nnx_ppo.algorithms.checkpointing import make_checkpoint_fn
    from nnx_ppo.algorithms.training import train_ppo
    from nnx_ppo.presets import make_networks
    from nnx_ppo.presets.overrides import make_train_config

    config = make_train_config(spec["config"])
    networks = make_networks(spec["network"], env.observation_size, env.action_size, config.seed)
    seen: list[tuple[float, int]] = []

    def timed(inner: Any) -> Any:
        def log_fn(metrics: dict[str, Any], step: int) -> None:
            inner(metrics, step)
            seen.append((time.perf_counter(), step))

        return log_fn

    if tracked_url is None:  # the same checkpoints, to a local folder
        with tempfile.TemporaryDirectory(prefix="plain-checkpoints-") as folder:
            checkpoint_fn = make_checkpoint_fn(folder, config=config)
            log_fn = timed(lambda _m, _s: None)
            train_ppo(env, networks, config, log_fn=log_fn, checkpoint_fn=checkpoint_fn)
    else:
        with track("overhead", url=tracked_url, token=TOKEN, config=spec) as run:
            train_ppo(env, networks, config, **{**run.callbacks, "log_fn": timed(run.log_fn)})
    (t0, s0), (t1, s1) = seen[0], seen[-1]
    return (s1 - s0) / (t1 - t0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="PointReach")
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--n-envs", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from nnx_ppo import envs

    spec = {
        "kind": "ppo",
        "env": {"name": args.env},
        "network": {"kind": "mlp", "actor_hidden_sizes": [64], "critic_hidden_sizes": [64]},
        "config": {
            "ppo": {"n_envs": args.n_envs, "rollout_length": 10, "total_steps": args.steps},
            "eval": {"enabled": False},
        },
    }
    env = envs.load(args.env, {})
    with tempfile.TemporaryDirectory(prefix="track-overhead-") as tmp:
        service = Service(Path(tmp) / "data", jax_cache=Path(tmp) / "jax", worker=False).start()
        try:
            _steady_sps(env, spec, None)  # warm-up: compiles
            pairs = []
            for i in range(args.pairs):
                order = (None, service.url) if i % 2 == 0 else (service.url, None)
                sps = {("tracked" if u else "plain"): _steady_sps(env, spec, u) for u in order}
                pairs.append({**sps, "ratio": sps["tracked"] / sps["plain"]})
                print(
                    f"pair {i + 1}: plain {sps['plain']:.0f} steps/s, tracked "
                    f"{sps['tracked']:.0f} steps/s, ratio {pairs[-1]['ratio']:.3f}",
                    flush=True,
                )
        finally:
            service.close()
    ratio = statistics.median(p["ratio"] for p in pairs)
    verdict = "meets" if ratio >= TARGET else "misses"
    print(f"median ratio tracked/plain {ratio:.3f}: {verdict} the target {TARGET}")
    path = write_results(
        "track-overhead",
        {
            "args": vars(args),
            "pairs": pairs,
            "median_ratio": ratio,
            "target": TARGET,
            "machine": machine_facts(),
            "time": time.time(),
        },
    )
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
