"""A training script tracked with ``nnx_ppo.track``, run by the tests as a subprocess:
PointReach at its smallest (``tests.service_harness.tiny_ppo_spec``), its spec given as
the run's config so that its checkpoints resume on the service.

    python -m tests.tracking.track_script --url URL --token T --steps N [--pause S]
        [--mode offline --dir DIR] [--steps-file FILE]

Prints one JSON line ``{"id": ..., "directory": ...}`` once the run is tracked; writes the
steps it logged, one a line, to ``--steps-file``; ``--pause`` sleeps after each logged
iteration (to keep the run going while a test restarts the service).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url")
    parser.add_argument("--token")
    parser.add_argument("--steps", type=int, default=8000)
    parser.add_argument("--pause", type=float, default=0.0)
    parser.add_argument("--mode", default="online")
    parser.add_argument("--dir")
    parser.add_argument("--steps-file")
    parser.add_argument("--name", default="tracked-pointreach")
    args = parser.parse_args()

    from nnx_ppo import envs, track
    from nnx_ppo.algorithms.training import train_ppo
    from nnx_ppo.presets import make_networks
    from nnx_ppo.presets.overrides import make_train_config
    from nnx_ppo.utils import enable_compilation_cache
    from tests.service_harness import JAX_CACHE, tiny_ppo_spec

    enable_compilation_cache(JAX_CACHE)
    spec = tiny_ppo_spec(args.steps)
    config = make_train_config(spec["config"])
    env = envs.load("PointReach", {})
    networks = make_networks(spec["network"], env.observation_size, env.action_size, config.seed)
    logged = open(args.steps_file, "w") if args.steps_file else None  # noqa: SIM115
    with track(
        args.name,
        url=args.url,
        token=args.token,
        config=spec,
        mode=args.mode,
        directory=args.dir,
        heartbeat_s=0.5,
    ) as run:
        print(json.dumps({"id": run.id, "directory": str(run.directory)}), flush=True)

        def log_fn(metrics: dict[str, Any], step: int) -> None:
            run.log_fn(metrics, step)
            if logged is not None:
                logged.write(f"{step}\n")
                logged.flush()
            time.sleep(args.pause)

        train_ppo(env, networks, config, **{**run.callbacks, "log_fn": log_fn})
        run.log("the script is done")


if __name__ == "__main__":
    main()
