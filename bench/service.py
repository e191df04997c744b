"""Speed of the training-control service (issue 4, "Speed"): one subcommand per figure, each
writing ``bench/results/service-<name>-<time>.json`` with the machine's load, the date and
the git commit.

    python -m bench.service throughput      # service vs train_ppo direct, alternating rounds
    python -m bench.service latency         # metric wall_time -> websocket client, p50/p95
    python -m bench.service fanout          # 100 websocket followers + API polling latency
    python -m bench.service metrics         # GET /metrics?max_points=1000 over 1M points
    python -m bench.service compile-cache   # 1st vs 2nd run of one config, empty cache
    python -m bench.service direct-run --spec JSON --cache DIR   # (throughput's direct side)

``python -m bench.service <name> --help`` lists each one's options. Every service is a real
``nnx-ppo serve`` subprocess (API, supervisor, one spawned run process per run) on its own
data directory under ``bench/.cache/service``.
"""

from __future__ import annotations

import importlib
import sys
import time

from bench.runs import write_results
from bench.service_harness import machine_facts

COMMANDS = {
    "throughput": "bench.service_throughput",
    "direct-run": "bench.service_throughput",
    "compile-cache": "bench.service_throughput",
    "latency": "bench.service_stream",
    "fanout": "bench.service_stream",
    "metrics": "bench.service_metrics",
}


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        print(__doc__)
        raise SystemExit(2)
    name, rest = argv[0], argv[1:]
    module = importlib.import_module(COMMANDS[name])
    entry = getattr(module, "main" if name == "metrics" else name.replace("-", "_"))
    before = machine_facts()
    started = time.time()
    result = entry(rest)
    if result is None:  # a helper subcommand that prints its own output
        return
    payload = {
        "benchmark": f"service-{name}",
        "command": "python -m bench.service " + " ".join(argv),
        "machine_before": before,
        "machine_after": machine_facts(),
        "wall_seconds": time.time() - started,
        **result,
    }
    path = write_results(f"service-{name}", payload)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
