"""A tracked script without training (no JAX): it reports two metrics, then waits to be
killed. ``python -m tests.tracking.idle_script URL TOKEN``; prints the run's id."""

from __future__ import annotations

import sys
import time

from nnx_ppo.tracking import track


def main() -> None:
    run = track("idle", url=sys.argv[1], token=sys.argv[2], heartbeat_s=0.3)
    run.log_fn({"losses/total": 1.0}, 10)
    run.log_fn({"losses/total": 0.5}, 20)
    print(run.id, flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
