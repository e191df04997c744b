"""The database: engine, sessions, migrations, for SQLite (the embedded default) and
PostgreSQL (a shared deployment, ``postgresql+psycopg://...``).

SQLite writers (``transaction``) take the write lock at the start of a transaction
(``BEGIN IMMEDIATE``), so two writers never deadlock upgrading read locks; readers use a
plain ``BEGIN`` and never block or wait in WAL mode (SQLite is opened with WAL, foreign keys
and a busy timeout).

PostgreSQL runs transactions at READ COMMITTED and has no database-wide write lock: writers
lock the rows they change instead. The run store locks a run's row (``SELECT ... FOR
UPDATE``) before it changes the run or appends its events, and claims a queued run with
``FOR UPDATE SKIP LOCKED`` (see ``run_store``); on SQLite those clauses are not rendered and
``BEGIN IMMEDIATE`` gives the same exclusion.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
BUSY_TIMEOUT_MS = 30_000
BACKENDS = ("sqlite", "postgresql")
_MIGRATION_LOCK = 0x6E6E7870  # PostgreSQL advisory lock key: one migrating process at a time


class UnsupportedDatabase(ValueError):
    """A database URL whose backend the store does not support."""


def backend(url: str) -> str:
    """``sqlite`` or ``postgresql`` for a SQLAlchemy URL; ``UnsupportedDatabase`` else."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UnsupportedDatabase(
            "not a database URL (sqlite:///PATH or postgresql+psycopg://USER@HOST/DB)"
        ) from None
    name = parsed.get_backend_name()
    if name not in BACKENDS:
        raise UnsupportedDatabase(
            f"unsupported database {name!r}: use sqlite:///PATH or postgresql+psycopg://..."
        )
    if name == "postgresql" and parsed.get_driver_name() != "psycopg":
        raise UnsupportedDatabase(
            f"PostgreSQL is reached through psycopg 3: postgresql+psycopg://... "
            f"(not the {parsed.get_driver_name()!r} driver)"
        )
    return name


def make_engine(url: str, *, durable: bool = True) -> Engine:
    """An engine for ``url``.

    SQLite: WAL, foreign keys, a 30 s busy timeout, and transactions that begin with
    ``BEGIN IMMEDIATE``. ``durable``: each commit is synced to disk (``synchronous=FULL``);
    without it, only WAL checkpoints are (for bulk test fixtures). PostgreSQL: a pool whose
    connections are checked before use (the server may have restarted); commits are as
    durable as the server is configured.
    """
    if backend(url) == "postgresql":
        return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)
    engine = create_engine(
        url,
        connect_args={"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
        pool_size=20,
        max_overflow=40,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection):  # type: ignore[no-untyped-def]
        immediate = connection.get_execution_options().get("immediate", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def dialect(session: Session) -> str:
    """The session's backend: ``"sqlite"`` or ``"postgresql"``."""
    return session.get_bind().dialect.name


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session whose work is committed at the end of the block (rolled back on error).

    It is a write transaction: on SQLite it takes the write lock when it begins (``BEGIN
    IMMEDIATE``); on PostgreSQL the rows it locks (``FOR UPDATE``) are its exclusion. Plain
    sessions are read transactions, which never wait for writers nor block them.
    """
    with factory() as session, session.begin():
        session.connection(execution_options={"immediate": True})
        yield session


def migrate(url: str) -> None:
    """Applies every Alembic migration to the database at ``url`` (idempotent)."""
    if backend(url) == "sqlite" and url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            if engine.dialect.name == "postgresql":  # the API and a worker may start together
                connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
            connection.commit()
    finally:
        engine.dispose()
