"""A throwaway PostgreSQL server for tests: ``initdb`` in a temporary directory, started
with ``pg_ctl`` on a free loopback port, stopped and removed by whoever started it.

PostgreSQL refuses to run as root, so as root the cluster belongs to the ``postgres`` user
(Debian's package creates it) and its commands run through ``runuser``. Each test database
is a fresh ``CREATE DATABASE`` with every migration applied.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.service_harness import free_port

SUPERUSER = "nnx_ppo"


def binaries() -> Path | None:
    """The directory of ``initdb``/``pg_ctl``: on PATH, else Debian's versioned one."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


class PostgresServer:
    """One cluster; ``database()`` hands out fresh, migrated databases on it."""

    def __init__(self, bin_dir: Path):
        self.bin_dir = bin_dir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="nnx-ppo-pg-"))
        self.data = self.root / "data"
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            self.as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.root, "postgres", "postgres")
        self.started = False

    def _run(self, *args: str) -> None:
        result = subprocess.run(
            [*self.as_user, *args], capture_output=True, text=True, timeout=120, check=False
        )
        if result.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({result.returncode}):\n{result.stderr}")

    def start(self) -> PostgresServer:
        self._run(
            str(self.bin_dir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
        )
        # A test cluster: durability off (the tests check locking, not the disk), few
        # resources (the machine is shared), loopback and a socket in the temp dir only.
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self.root} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
            "-c shared_buffers=64MB"
        )
        self._run(
            str(self.bin_dir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )
        self.started = True
        return self

    def stop(self) -> None:
        if self.started:
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def database(self, *, migrated: bool = True) -> str:
        """A new empty database's URL (with every migration applied when ``migrated``)."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        dsn = f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname=postgres"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = self.url(name)
        if migrated:
            from server.store.db import migrate

            migrate(url)
        return url


def start_or_skip() -> PostgresServer:
    """A started server, or a skip that says why there is none."""
    bin_dir = binaries()
    if bin_dir is None:
        pytest.skip("PostgreSQL's initdb/pg_ctl are not installed (apt-get install postgresql)")
    return PostgresServer(bin_dir).start()


def service_env(request: pytest.FixtureRequest, backend: str) -> dict[str, str]:
    """The environment that puts an ``nnx-ppo serve`` on ``backend``: nothing for SQLite (the
    data directory's file); for PostgreSQL ``NNX_PPO_DATABASE_URL`` of a fresh, unmigrated
    database on the session's ``postgres`` cluster (the service runs its own migrations),
    or a skip where PostgreSQL is not installed."""
    if backend == "sqlite":
        return {}
    if backend != "postgresql":
        raise ValueError(f"unknown backend {backend!r}")
    server: PostgresServer = request.getfixturevalue("postgres")
    return {"NNX_PPO_DATABASE_URL": server.database(migrated=False)}
