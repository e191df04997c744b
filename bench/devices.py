"""Env steps/s of one run on 1 and on N host devices at equal total envs (``config.devices``).

::

    python -m bench.devices                      # SPEED settings, 1 vs 2 devices, 2 rounds
    python -m bench.devices --devices 4 --rounds 1 --total-steps 1024000

Every run is a fresh process started with ``XLA_FLAGS=--xla_force_host_platform_device_count=N``
(the same flag for both counts, so only ``config.devices`` differs), alternating 1 and N.
On a CPU the "devices" are partitions of one host's cores: this measures the cost of the
sharded program, not a speed-up a multi-GPU box would see. Prints a table and writes
``bench/results/devices-<time>.json``.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from typing import Any

from bench.nnx_runner import run_nnx_ppo_subprocess
from bench.runs import write_results
from bench.settings import SPEED


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--total-steps", type=int, default=2_048_000)
    args = parser.parse_args(argv)
    settings = {**SPEED, "total_steps": args.total_steps, "num_evals": 3}
    flags = {"XLA_FLAGS": f"--xla_force_host_platform_device_count={args.devices}"}
    runs: list[dict[str, Any]] = []
    for round_ in range(args.rounds):
        for devices in (1, args.devices):
            result = run_nnx_ppo_subprocess({**settings, "devices": devices}, env=flags)
            runs.append({"round": round_, "devices": devices, **result})
            print(
                f"round {round_}  devices {devices}  "
                f"{result['env_steps_per_second']:>10,.0f} env steps/s  "
                f"compile {result['train_compile_seconds']:.1f} s",
                flush=True,
            )
            write_results("devices", {"settings": settings, "runs": runs})

    def median(devices: int) -> float:
        return statistics.median(r["env_steps_per_second"] for r in runs if r["devices"] == devices)

    one, many = median(1), median(args.devices)
    print(f"median: 1 device {one:,.0f}, {args.devices} devices {many:,.0f} ({many / one:.2f}x)")


if __name__ == "__main__":
    main()
