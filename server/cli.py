"""The ``nnx-ppo`` console script: ``serve`` and ``worker`` here, the library's commands
(``envs``, ``train``) in ``nnx_ppo.cli``, the client's (``submit``, ``ls``, ...) in
``nnx_ppo.client.cli``, ``sync`` in ``nnx_ppo.tracking.cli``; ``nnx-ppo --help`` lists them
all."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

from pydantic import ValidationError

from nnx_ppo.cli import COMMANDS as LIBRARY_COMMANDS
from nnx_ppo.client.cli import COMMANDS as CLIENT_COMMANDS
from nnx_ppo.tracking.cli import COMMANDS as TRACKING_COMMANDS

SERVICE_COMMANDS = {
    "serve": "start the API, the dashboard and a local worker",
    "worker": "run a worker supervisor alone, against the same database as the API",
}
COMMANDS = (*SERVICE_COMMANDS, *LIBRARY_COMMANDS, *CLIENT_COMMANDS, *TRACKING_COMMANDS)
"""Every command of ``nnx-ppo``, in the order ``--help`` lists them."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nnx-ppo",
        description="PPO and distillation on MuJoCo Playground, and the service that runs "
        "it. `nnx-ppo COMMAND --help` describes each command.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser("serve", help=SERVICE_COMMANDS["serve"])
    serve.add_argument("--host", help="interface to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8000)")
    serve.add_argument("--no-worker", action="store_true", help="start the API alone")
    serve.add_argument(
        "--new-token",
        action="store_true",
        help="replace the access token kept in the data directory (the old one stops working; "
        "NNX_PPO_API_TOKEN, when set, is the token either way)",
    )
    serve.add_argument(
        "--public-url",
        help="the API's URL as run processes on other nodes reach it (Ray executor; "
        "default http://HOST:PORT)",
    )
    serve.add_argument(
        "--allowed-hosts",
        help="comma-separated Host names accepted besides loopback (needed with --host 0.0.0.0)",
    )
    worker = sub.add_parser("worker", help=SERVICE_COMMANDS["worker"])
    for command in (serve, worker):
        command.add_argument(
            "--data-dir", help="data directory (default ./nnx_ppo_data; env NNX_PPO_DATA_DIR)"
        )
        command.add_argument(
            "--workers",
            type=int,
            help="GPU machine: runs executing at once (default: runs-per-device per GPU); "
            "CPU-only machine: its host devices (default 1)",
        )
        command.add_argument(
            "--runs-per-device",
            type=int,
            help="runs sharing one device (default 1; env NNX_PPO_RUNS_PER_DEVICE); above 1, "
            "runs do not preallocate device memory",
        )
        command.add_argument(
            "--executor",
            choices=("local", "ray"),
            help="where run processes execute: this host (local, the default) or a Ray "
            "cluster (ray: pip install nnx-ppo[ray]; env NNX_PPO_EXECUTOR)",
        )
        command.add_argument(
            "--ray-address", help="the Ray cluster's head, HOST:PORT (env NNX_PPO_RAY_ADDRESS)"
        )
    # Listed for --help; main() hands their arguments to their own modules' parsers.
    for name, text in {**LIBRARY_COMMANDS, **CLIENT_COMMANDS, **TRACKING_COMMANDS}.items():
        sub.add_parser(name, help=text, add_help=False)
    return parser


def _settings(args: argparse.Namespace, api_token: str | None = None) -> Any:
    from server.settings import Settings

    overrides = {
        "api_token": api_token,
        "host": getattr(args, "host", None),
        "port": getattr(args, "port", None),
        "data_dir": args.data_dir,
        "workers": args.workers,
        "runs_per_device": args.runs_per_device,
        "allowed_hosts": getattr(args, "allowed_hosts", None),
        "public_url": getattr(args, "public_url", None),
        "executor": args.executor,
        "ray_address": args.ray_address,
    }
    return Settings(**{k: v for k, v in overrides.items() if v is not None})


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from server.app import create_app
    from server.store.db import migrate
    from server.token_file import service_token

    # uvicorn stops gracefully on SIGTERM, then raises the signal again with the handler it
    # found: the default one would end the process with -SIGTERM after a clean stop. The
    # same for Ctrl-C (SIGINT), whose default is a KeyboardInterrupt traceback; the children
    # ignore it (server.child_processes) and are stopped in order by the API.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    signal.signal(signal.SIGINT, _exit_interrupted)
    settings = _settings(args)
    settings.ensure_dirs()
    token = service_token(settings.data_dir, settings.api_token, rotate=args.new_token)
    settings = _settings(args, api_token=token)
    migrate(settings.db_url)
    app = create_app(settings, with_worker=not args.no_worker)
    shown = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    shown = f"[{shown}]" if ":" in shown else shown
    print(
        f"nnx-ppo {'API' if args.no_worker else 'API and worker'}: data in "
        f"{settings.data_dir.resolve()}",
        flush=True,
    )
    print(f"Dashboard: http://{shown}:{settings.port}/?token={settings.token}", flush=True)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        ws_max_size=65536,
        ws_per_message_deflate=False,  # a quarter of the API's CPU while fanning out
        timeout_graceful_shutdown=5,
        log_level="warning",
    )
    return 0


def _exit_cleanly(_signum: int, _frame: Any) -> None:
    raise SystemExit(0)


def _exit_interrupted(_signum: int, _frame: Any) -> None:
    raise SystemExit(130)  # a shell's status for a command ended by Ctrl-C


def worker(args: argparse.Namespace) -> int:
    from server.worker import supervisor

    settings = _settings(args)
    supervisor.main(settings.model_dump_json())
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in CLIENT_COMMANDS:
        from nnx_ppo.client import cli as client_cli

        return client_cli.main(argv)
    if argv and argv[0] in TRACKING_COMMANDS:
        from nnx_ppo.tracking import cli as tracking_cli

        return tracking_cli.main(argv)
    if argv and argv[0] in LIBRARY_COMMANDS:
        from nnx_ppo import cli

        return cli.main(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")
    args = _parser().parse_args(argv)
    try:
        return serve(args) if args.command == "serve" else worker(args)
    except ValidationError as error:
        for e in error.errors():
            print(f"error: {'.'.join(map(str, e['loc']))}: {e['msg']}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
