"""The client's commands of the ``nnx-ppo`` console script (``COMMANDS``). Errors print
one line and exit non-zero (1: the service refused or cannot be reached; 2: bad input
here)."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nnx_ppo.client.client import Client
from nnx_ppo.client.errors import ClientError, Unauthorized
from nnx_ppo.client.terminal import printable

COMMANDS = {
    "submit": "queue a run (a spec file, or --preset ENV --steps N)",
    "ls": "list runs, newest first",
    "watch": "follow a run live",
    "logs": "a run's output",
    "cancel": "stop a run",
    "delete": "delete a finished run and its files",
    "pull": "download a checkpoint (and videos)",
    "export": "a finished run's scalars as a TensorBoard event file, or replayed into W&B",
    "sweep": "start a hyperparameter sweep and follow it",
}
"""Each command with its one-line help."""


def connection_arguments() -> argparse.ArgumentParser:
    """The ``--url`` and ``--token`` every command that talks to the service takes (a
    parent parser)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="the service (default NNX_PPO_URL, else 127.0.0.1:8000)")
    common.add_argument(
        "--token",
        help="access token (default NNX_PPO_API_TOKEN, else <data dir>/api_token, the data "
        "dir being NNX_PPO_DATA_DIR or ./nnx_ppo_data)",
    )
    return common


def _parser() -> argparse.ArgumentParser:
    common = connection_arguments()
    parser = argparse.ArgumentParser(prog="nnx-ppo", description="The service from the shell.")
    sub = parser.add_subparsers(dest="command", required=True)
    submit = sub.add_parser("submit", parents=[common], help=COMMANDS["submit"])
    submit.add_argument("file", nargs="?", help="a run spec (JSON file; - for stdin)")
    submit.add_argument(
        "--preset",
        metavar="ENV",
        help="instead of a file: train ENV with its preset (the service fills the spec)",
    )
    submit.add_argument("--steps", type=int, help="with --preset: total env steps")
    submit.add_argument("--name", help="the run's name")
    submit.add_argument("--tag", action="append", default=None, help="a tag (repeatable)")
    submit.add_argument("--follow", action="store_true", help="then watch it to its end")
    ls = sub.add_parser("ls", parents=[common], help=COMMANDS["ls"])
    ls.add_argument("--status")
    ls.add_argument("--kind")
    ls.add_argument("--tag")
    ls.add_argument("-q", "--query", help="search names")
    ls.add_argument("-n", "--limit", type=int, default=20)
    for name in ("watch", "cancel", "delete"):
        sub.add_parser(name, parents=[common], help=COMMANDS[name]).add_argument("id")
    logs = sub.add_parser("logs", parents=[common], help=COMMANDS["logs"])
    logs.add_argument("id")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    logs.add_argument("--tail", type=int, help="only the last N lines")
    pull = sub.add_parser("pull", parents=[common], help=COMMANDS["pull"])
    pull.add_argument("id")
    pull.add_argument("--step", type=int, help="the checkpoint's step (default: the newest)")
    pull.add_argument("--videos", action="store_true", help="also the run's videos")
    pull.add_argument("--dest", help="folder (default ./<id>)")
    export = sub.add_parser("export", parents=[common], help=COMMANDS["export"])
    export.add_argument("id")
    export.add_argument("--to", choices=["tensorboard", "wandb"], required=True)
    export.add_argument("--dest", help="tensorboard: the log dir to write into (default ./ID)")
    export.add_argument("--project", help="wandb: the W&B project (required)")
    export.add_argument("--entity", help="the W&B entity (team or user)")
    export.add_argument(
        "--mode",
        choices=["offline", "online"],
        default="offline",
        help="offline (default; upload later with `wandb sync`) or online",
    )
    sweep = sub.add_parser("sweep", parents=[common], help=COMMANDS["sweep"])
    sweep.add_argument("file", help="a sweep (JSON file: spec, space, method, ...; - for stdin)")
    sweep.add_argument("--name", help="the sweep's name")
    sweep.add_argument("--no-follow", action="store_true", help="only submit it")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    return run_with_client(_HANDLERS[args.command], args)


def run_with_client(
    handler: Callable[[Client, argparse.Namespace], int], args: argparse.Namespace
) -> int:
    """``handler(client, args)`` with a client of ``args.url`` and ``args.token``; an error
    prints one line and gives the exit status (1: the service refused or cannot be reached;
    2: bad input here; 130: interrupted)."""
    try:
        with Client(args.url, args.token) as client:
            return int(handler(client, args))
    except Unauthorized as error:
        print(f"error: {error.cli_message()}", file=sys.stderr)
        return 1
    except ClientError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as error:  # a spec file that cannot be read, bad JSON
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _submit(client: Client, args: argparse.Namespace) -> int:
    if (args.file is None) == (args.preset is None):
        raise ValueError("give a spec file or --preset ENV (one of them)")
    if args.steps is not None and args.preset is None:
        raise ValueError("--steps goes with --preset (a spec file sets config.ppo.total_steps)")
    spec = preset_spec(args.preset, args.steps) if args.preset else _read_spec(args.file)
    if args.name:
        spec["name"] = args.name
    if args.tag:
        spec["tags"] = [*spec.get("tags", []), *args.tag]
    run = client.submit(spec)
    print(f"{run.id}  {printable(run.name)}  {run.status}", flush=True)
    if args.follow:
        from nnx_ppo.client.watch import watch

        return watch(client, run.id)
    return 0


def _sweep(client: Client, args: argparse.Namespace) -> int:
    body = _read_spec(args.file, "a sweep")
    if args.name:
        body["name"] = args.name
    sweep = client.submit_sweep(body)
    print(f"{sweep.id}  {printable(sweep.name)}  {sweep.status}", flush=True)
    if args.no_follow:
        return 0
    from nnx_ppo.client.sweep_watch import follow

    return follow(client, sweep.id)


def _read_spec(file: str, what: str = "a run spec") -> dict[str, Any]:
    text = sys.stdin.read() if file == "-" else Path(file).read_text()
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{file}: not valid JSON: {error}") from None
    if not isinstance(spec, dict):
        raise ValueError(f"{file}: {what} is a JSON object")
    return spec


def preset_spec(env: str, total_steps: int | None = None) -> dict[str, Any]:
    """The run spec of ``submit --preset ENV [--steps N]``: only what was given (the
    service fills every other field from ENV's preset)."""
    spec: dict[str, Any] = {"kind": "ppo", "env": {"name": env}}
    if total_steps is not None:
        spec["config"] = {"ppo": {"total_steps": total_steps}}
    return spec


def _ls(client: Client, args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    page = client.runs(
        status=args.status, kind=args.kind, tag=args.tag, q=args.query, limit=args.limit
    )
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("ID", "NAME", "STATUS", "STEPS", "EVAL REWARD", "CREATED", "TAGS"):
        table.add_column(column, no_wrap=column in ("ID", "STATUS", "CREATED"))
    for run in page:
        reward = run.latest_metrics.get("eval/episode_reward")
        table.add_row(
            run.id,
            Text(printable(run.name)),  # a Text: never read as rich markup
            run.status,
            f"{run.steps:,}/{run.total_steps:,}",
            "" if reward is None else f"{reward:.3f}",
            datetime.datetime.fromtimestamp(run.created_at).strftime("%Y-%m-%d %H:%M"),
            Text(printable(",".join(run.tags))),
        )
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    console.print(table)
    if page.total > len(page):
        console.print(f"({len(page)} of {page.total}; see --limit)")
    return 0


def _watch(client: Client, args: argparse.Namespace) -> int:
    from nnx_ppo.client.watch import watch

    return watch(client, args.id)


def _logs(client: Client, args: argparse.Namespace) -> int:
    if not args.follow:
        sys.stdout.write(client.logs(args.id, args.tail))
        return 0
    run = client.run(args.id)
    text = client.logs(args.id, args.tail)
    sys.stdout.write(text)
    sys.stdout.flush()
    if run.finished:
        return 0
    # Lines logged between reading the run and its log are in both: skip those repeats.
    recent = text.splitlines()[-50:]
    for event in client.follow(args.id, after_seq=run.last_seq):
        if event.type == "log" and event.line is not None:
            if recent and event.line in recent:
                recent = recent[recent.index(event.line) + 1 :]
                continue
            recent = []
            print(event.line, flush=True)
    return 0


def _cancel(client: Client, args: argparse.Namespace) -> int:
    run = client.cancel(args.id)
    state = "cancelled" if run.status == "cancelled" else f"{run.status}, stopping"
    print(f"{run.id}  {state}")
    return 0


def _pull(client: Client, args: argparse.Namespace) -> int:
    run = client.run(args.id)
    dest = Path(args.dest or run.id)
    path = client.download_checkpoint(run.id, args.step, dest)
    (dest / "spec.json").write_text(json.dumps(run.spec, indent=2) + "\n")
    print(f"checkpoint: {path}")
    print(f"spec: {dest / 'spec.json'}")
    if args.videos:
        for video in client.videos(run.id):
            print(f"video: {client.download_video(run.id, video.id, dest / 'videos')}")
    return 0


def _delete(client: Client, args: argparse.Namespace) -> int:
    client.delete(args.id)
    print(f"{args.id}  deleted")
    return 0


def _export(client: Client, args: argparse.Namespace) -> int:
    if args.to == "tensorboard":
        print(client.export_tensorboard(args.id, args.dest or args.id))
        return 0
    if not args.project:
        raise ValueError("export --to wandb needs --project (the W&B project)")
    from nnx_ppo.client.wandb_export import export_to_wandb

    where = export_to_wandb(
        client, args.id, project=args.project, entity=args.entity, mode=args.mode
    )
    print(where)
    return 0


_HANDLERS = {
    "submit": _submit,
    "ls": _ls,
    "watch": _watch,
    "logs": _logs,
    "cancel": _cancel,
    "delete": _delete,
    "pull": _pull,
    "export": _export,
    "sweep": _sweep,
}
