"""The ``nnx-ppo`` command line: list envs, and train a preset from the shell.

``nnx-ppo train ENV [KEY=VALUE ...]`` trains ``ENV``'s preset (``--preset NAME`` is the same
as ``ENV``); ``KEY=VALUE`` are dotted overrides (``ppo.learning_rate=3e-4``,
``network.actor_hidden_sizes=[64,64]``, ``env.episode_length=500``; see
``nnx_ppo.presets.overrides``). ``--print-config`` prints the resolved preset as JSON
instead of training; ``--config FILE`` reads such a JSON; ``--json PATH`` writes the
result (evaluations with their wall times) when training ends; ``--out DIR`` writes
checkpoints into ``DIR`` (every ``checkpoint_every_steps`` and at the end).

``nnx-ppo policy export RUN_OR_DIR --format onnx|stablehlo -o FILE [--step S]`` writes a
checkpoint's policy as a program that runs without nnx-ppo (``nnx_ppo.policy.exporting``):
from a local checkpoint or directory of them, or from a run of the service by its id.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Any

COMMANDS = {
    "envs": "list every env; the unavailable ones with the reason",
    "train": "train an env's preset here (no service) and print its evaluations",
    "policy": "export a checkpoint's policy (local, or a run's) as ONNX or StableHLO",
}
"""The library's commands with their one-line help."""


def _resolve(args: argparse.Namespace) -> Any:
    """The preset to train: from ``--config`` or the env's preset, with ``--variant``,
    ``--n-envs``, ``--steps`` and the dotted overrides applied (in that order; ``--seed N``
    is the override ``seed=N``)."""
    from nnx_ppo import presets
    from nnx_ppo.presets import overrides

    names = [a for a in args.items if "=" not in a]
    assignments = [overrides.parse_assignment(a) for a in args.items if "=" in a]
    if args.seed is not None:
        given = [value for key, value in assignments if key == "seed"]
        if given and given != [args.seed]:
            raise ValueError(f"give the seed once: --seed {args.seed} or seed={given[0]}")
        assignments.insert(0, ("seed", args.seed))
    if len(names) > 1 or (names and args.preset):
        raise ValueError(f"give one env name, got {[*names, *filter(None, [args.preset])]}")
    name = names[0] if names else args.preset
    if args.config is not None:
        if name:
            raise ValueError("give either an env name or --config, not both")
        try:
            with open(args.config) as f:
                data = json.load(f)
        except (OSError, ValueError) as error:
            raise ValueError(f"cannot read --config {args.config}: {error}") from None
        preset = overrides.from_json(data)
    else:
        preset = presets.preset(name or "CartpoleBalance", args.variant)
    if args.n_envs is not None or args.steps is not None:
        preset = preset.with_overrides(n_envs=args.n_envs, total_steps=args.steps)
    return overrides.apply(preset, assignments) if assignments else preset


def _train(args: argparse.Namespace) -> int:
    from nnx_ppo.presets import overrides

    preset = _resolve(args)
    if args.print_config:
        print(json.dumps(overrides.to_json(preset), indent=2))
        return 0

    from rich.console import Console

    from nnx_ppo import envs
    from nnx_ppo.algorithms.checkpointing import make_checkpoint_fn
    from nnx_ppo.algorithms.ppo import train_ppo
    from nnx_ppo.progress import StepRate, fields, make_progress
    from nnx_ppo.utils import enable_compilation_cache

    enable_compilation_cache(args.cache_dir)
    env = envs.load(preset.env, preset.env_overrides)
    config = preset.config
    seed = config.seed  # from the preset, --seed or seed=N: the one the run trains with
    networks = preset.make_networks(env.observation_size, env.action_size, seed)
    start = time.perf_counter()
    total = config.ppo.total_steps
    rate = StepRate(min_interval_s=0.05)
    progress = make_progress(Console(highlight=False))
    eval_wall: dict[int, float] = {}

    def log(metrics: dict, step: int) -> None:
        rate.add(time.perf_counter(), step)
        reward = metrics.get("eval/episode_reward")
        shown = fields(rate, step, total, reward)
        progress.update(task, completed=step, **shown)  # type: ignore[arg-type]
        if reward is not None:
            eval_wall[step] = time.perf_counter() - start
            progress.console.print(
                f"step {step:>10d}  {eval_wall[step]:7.1f}s  eval/episode_reward {reward:8.2f}",
                markup=False,
            )

    with progress:
        task = progress.add_task("training", total=total, sps="", eta="", reward="")
        checkpoint_fn = None if args.out is None else make_checkpoint_fn(args.out, config)
        result = train_ppo(
            env,
            networks,
            config,
            log_fn=log,
            checkpoint_fn=checkpoint_fn,
            randomization_fn=preset.randomization_fn(),
        )
    if args.out is not None:
        print(f"checkpoints: {os.path.abspath(args.out)}")
    if args.json is not None:
        history = [
            {"step": e["step"], "wall_s": eval_wall.get(e["step"]), **e}
            for e in result.eval_history
        ]
        report = {
            "preset": overrides.to_json(preset),
            "env": preset.env,
            "seed": seed,
            "total_steps": int(result.total_steps),
            "wall_s": time.perf_counter() - start,
            "eval_history": history,
        }
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


RUN_ID = re.compile(r"[0-9a-f]{12}")
"""A service run's id (``server.api.deps.RUN_ID``)."""


def _policy_export(args: argparse.Namespace) -> int:
    """Exports a local checkpoint's policy, or downloads a service run's export (exit 1
    when the service refuses or cannot be reached, as the client's commands)."""
    source = args.source
    if not os.path.exists(source) and RUN_ID.fullmatch(source):
        from nnx_ppo.client import Client, ClientError, Unauthorized

        try:
            with Client(args.url, args.token) as client:
                path = client.download_policy(source, args.step, args.format, args.output)
        except ClientError as error:
            message = error.cli_message() if isinstance(error, Unauthorized) else str(error)
            print(f"error: {message}", file=sys.stderr)
            return 1
        print(f"{path}: run {source}'s policy as {args.format}")
        return 0
    if not os.path.exists(source):
        raise ValueError(f"{source!r} is neither a directory here nor a run id of the service")
    from nnx_ppo import policy

    loaded = policy.load(source, args.step)
    try:
        written = policy.export(loaded, args.output, args.format)
    except policy.MissingExtra as error:
        raise ValueError(str(error)) from None
    print(f"{written}: the policy of checkpoint step {loaded.step} as {args.format}")
    return 0


def _envs() -> int:
    """One line per env (stdout); the count and, once, the fix for missing assets (stderr)."""
    from nnx_ppo import catalogue

    names = catalogue.env_names()
    width = max(len(n) for n in names)
    unavailable = 0
    for name in names:
        missing = catalogue.missing_folders(name)
        status = "available"
        if missing is None:
            status = "UNAVAILABLE: needs MuJoCo Playground (not installed)"
        elif missing:
            status = f"UNAVAILABLE: missing {', '.join(str(m) for m in missing)}"
        unavailable += status != "available"
        print(f"{name:<{width}}  {catalogue.source_of(name):<10}  {status}")
    print(f"{len(names)} envs, {len(names) - unavailable} available", file=sys.stderr)
    if unavailable:
        print(f"Missing MuJoCo Menagerie assets: {catalogue.menagerie_fix()}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``nnx-ppo`` console script."""
    parser = argparse.ArgumentParser(prog="nnx-ppo", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("envs", help=COMMANDS["envs"])
    train = sub.add_parser(
        "train",
        help=COMMANDS["train"],
        description=__doc__.split("\n\n", 1)[1],
    )
    train.add_argument(
        "items",
        nargs="*",
        metavar="ENV | KEY=VALUE",
        help="the env (default CartpoleBalance), then dotted overrides",
    )
    train.add_argument("--preset", default=None, help="the env whose preset to train")
    train.add_argument("--variant", choices=("cpu", "gpu"), default=None)
    train.add_argument("--steps", type=int, default=None, help="override total env steps")
    train.add_argument(
        "--n-envs", type=int, default=None, help="envs (the minibatch count scales with it)"
    )
    train.add_argument(
        "--seed", type=int, default=None, help="the same as seed=N (default: the preset's)"
    )
    train.add_argument("--config", default=None, help="read the preset from this JSON file")
    train.add_argument("--print-config", action="store_true", help="print the preset as JSON")
    train.add_argument("--json", default=None, metavar="PATH", help="write the result here")
    train.add_argument(
        "--out", default=None, metavar="DIR", help="write checkpoints here (for `policy export`)"
    )
    train.add_argument(
        "--cache-dir",
        default=os.environ.get("NNX_PPO_JAX_CACHE", os.path.join(".cache", "jax")),
        help="JAX persistent compilation cache directory",
    )
    _policy_parser(sub)
    # Overrides may follow options (`train ENV --n-envs 8 ppo.learning_rate=3e-4`), which
    # a nargs="*" positional alone does not collect.
    args, extra = parser.parse_known_args(argv)
    stray = [a for a in extra if a.startswith("-") or args.command != "train"]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if args.command == "train":
        args.items = [*args.items, *extra]
    if args.command == "envs":
        return _envs()
    try:
        return _train(args) if args.command == "train" else _policy_export(args)
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _policy_parser(sub: Any) -> None:
    policy = sub.add_parser("policy", help=COMMANDS["policy"])
    actions = policy.add_subparsers(dest="action", required=True)
    export = actions.add_parser(
        "export",
        help="write a checkpoint's policy as ONNX or StableHLO",
        description="Writes the deterministic policy of a checkpoint as a program that runs "
        "without nnx-ppo: the observation is its first input, a recurrent policy's state "
        "follows (inputs and outputs). See nnx_ppo.policy.exporting.",
    )
    export.add_argument(
        "source",
        metavar="RUN_OR_DIR",
        help="a checkpoint, a directory of step_* checkpoints (nnx-ppo train --out), or a "
        "service run's id",
    )
    export.add_argument("--step", type=int, default=None, help="the checkpoint (default newest)")
    export.add_argument(
        "--format",
        choices=("onnx", "stablehlo"),
        required=True,
        help="onnx (onnxruntime) or stablehlo (a serialized jax.export program)",
    )
    export.add_argument("-o", "--output", required=True, metavar="FILE", help="write it here")
    export.add_argument("--url", help="for a run id: the service (default NNX_PPO_URL)")
    export.add_argument("--token", help="for a run id: the access token (default as `ls`)")


if __name__ == "__main__":
    sys.exit(main())
