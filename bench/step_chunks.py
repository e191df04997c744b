"""Which ``PPOConfig.env_step_chunk`` steps an env's physics fastest on this machine.

::

    python -m bench.step_chunks --env FingerSpin
    python -m bench.step_chunks --env WalkerWalk --n-envs 256 --chunks 256 64 32 16

For each chunk size in turn (all ``--n-envs`` envs as one ``vmap`` for ``--n-envs`` itself),
in one process: ``bench.physics_bound``'s env-only stepping (random actions, a jitted scan of
``--steps`` steps, the median of ``--repeats`` calls after the compiling one). The chunk
sizes run in order, then once more in reverse, and each size's env steps/s is the better of
its two, so that a drift in the machine's load does not favour one end of the list. Prints
each size against the unchunked batch and writes ``bench/results/step-chunks-<time>.json``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from bench.physics_bound import env_only_steps_per_second
from bench.runs import write_results


def sweep(env: str, n_envs: int, chunks: Sequence[int], steps: int, repeats: int) -> dict[str, Any]:
    """Env steps/s for each chunk size (``n_envs``: one ``vmap``), best of two passes."""
    bad = [c for c in chunks if c <= 0 or n_envs % c]
    if bad:
        raise ValueError(f"chunk sizes {bad} do not divide --n-envs {n_envs}")
    sizes = list(dict.fromkeys([n_envs, *chunks]))
    passes: dict[int, list[float]] = {size: [] for size in sizes}
    for size in [*sizes, *reversed(sizes)]:
        chunk = None if size == n_envs else size
        sps = env_only_steps_per_second(env, n_envs, steps, repeats, chunk)
        passes[size].append(sps)
        print(f"chunk {size:>5}: {sps:>12,.0f} env steps/s", flush=True)
    best = {size: max(values) for size, values in passes.items()}
    return {
        "kind": "step-chunks",
        "env": env,
        "n_envs": n_envs,
        "steps": steps,
        "repeats": repeats,
        "passes": {str(size): values for size, values in passes.items()},
        "env_steps_per_second": {str(size): sps for size, sps in best.items()},
        "speedup_over_one_batch": {str(size): sps / best[n_envs] for size, sps in best.items()},
        "fastest_chunk": max(best, key=lambda size: best[size]),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="FingerSpin")
    parser.add_argument("--n-envs", type=int, default=256)
    parser.add_argument("--chunks", type=int, nargs="+", default=[128, 64, 32, 16])
    parser.add_argument("--steps", type=int, default=30, help="steps a jitted call")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls a chunk size")
    args = parser.parse_args(argv)
    try:
        result = sweep(args.env, args.n_envs, args.chunks, args.steps, args.repeats)
    except ValueError as error:
        parser.error(str(error))
    path = write_results("step-chunks", result, None)
    for size, ratio in result["speedup_over_one_batch"].items():
        print(f"{args.env} chunk {size:>5}: {ratio:.2f}x one batch of {args.n_envs}")
    fastest = result["fastest_chunk"]
    print(f"fastest: env_step_chunk={None if fastest == args.n_envs else fastest}; results: {path}")


if __name__ == "__main__":
    main()
