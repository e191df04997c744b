"""The ``nnx-ppo`` command line: list envs, and train a preset from the shell."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time


def _train(args: argparse.Namespace) -> int:
    from rich.console import Console

    from nnx_ppo import envs, presets
    from nnx_ppo.algorithms.ppo import train_ppo
    from nnx_ppo.progress import StepRate, fields, make_progress
    from nnx_ppo.utils import enable_compilation_cache

    preset = presets.PRESETS.get(args.preset)
    if preset is None:
        print(f"unknown preset {args.preset!r}; known: {sorted(presets.PRESETS)}", file=sys.stderr)
        return 2
    enable_compilation_cache(args.cache_dir)
    env = envs.load(preset.env, preset.env_overrides)
    config = preset.config
    if args.steps is not None:
        config = dataclasses.replace(
            config, ppo=dataclasses.replace(config.ppo, total_steps=args.steps)
        )
    networks = preset.make_networks(env.observation_size, env.action_size, args.seed)
    start = time.perf_counter()
    total = config.ppo.total_steps
    rate = StepRate(min_interval_s=0.05)
    progress = make_progress(Console(highlight=False))

    def log(metrics: dict, step: int) -> None:
        rate.add(time.perf_counter(), step)
        reward = metrics.get("eval/episode_reward")
        shown = fields(rate, step, total, reward)
        progress.update(task, completed=step, **shown)  # type: ignore[arg-type]
        if reward is not None:
            progress.console.print(
                f"step {step:>10d}  {time.perf_counter() - start:7.1f}s  "
                f"eval/episode_reward {reward:8.2f}",
                markup=False,
            )

    with progress:
        task = progress.add_task("training", total=total, sps="", eta="", reward="")
        train_ppo(env, networks, config, seed=args.seed, log_fn=log)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``nnx-ppo`` console script."""
    parser = argparse.ArgumentParser(prog="nnx-ppo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("envs", help="list the environments that can be trained")
    train = sub.add_parser("train", help="train a preset and print its evaluations")
    train.add_argument("--preset", default="CartpoleBalance")
    train.add_argument("--steps", type=int, default=None, help="override total env steps")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument(
        "--cache-dir",
        default=os.environ.get("NNX_PPO_JAX_CACHE", os.path.join(".cache", "jax")),
        help="JAX persistent compilation cache directory",
    )
    args = parser.parse_args(argv)
    if args.command == "envs":
        from nnx_ppo import envs

        for name in envs.available_envs():
            print(name)
        return 0
    try:
        return _train(args)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
