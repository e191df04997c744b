"""The tracking commands of the ``nnx-ppo`` console script (``COMMANDS``): ``sync`` uploads
the runs ``track(..., mode="offline")`` wrote. Errors as the client's commands give them."""

from __future__ import annotations

import argparse

from nnx_ppo.client.cli import connection_arguments, run_with_client
from nnx_ppo.client.client import Client
from nnx_ppo.tracking.offline import offline_runs, sync

COMMANDS = {
    "sync": "upload offline tracked runs (folders written by track(..., mode='offline'))",
}
"""Each command with its one-line help."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nnx-ppo", description="Tracked runs from the shell.")
    sub = parser.add_subparsers(dest="command", required=True)
    sync_command = sub.add_parser("sync", parents=[connection_arguments()], help=COMMANDS["sync"])
    sync_command.add_argument(
        "dirs", nargs="+", metavar="DIR", help="a run's folder, or a folder of them"
    )
    return parser


def main(argv: list[str]) -> int:
    return run_with_client(_sync, _parser().parse_args(argv))


def _sync(client: Client, args: argparse.Namespace) -> int:
    folders = offline_runs(args.dirs)
    if not folders:
        raise ValueError(f"no offline run in {', '.join(args.dirs)} (no run.json)")
    for folder in folders:
        run_id = sync(folder, client.url, client.token)
        print(f"{folder}: run {run_id}")
    return 0
