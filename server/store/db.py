"""The database: engine (SQLite in WAL mode with a busy timeout), sessions, migrations.

SQLite writers (``transaction``) take the write lock at the start of a transaction
(``BEGIN IMMEDIATE``), so two writers never deadlock upgrading read locks; readers use a
plain ``BEGIN`` and never block or wait in WAL mode.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
BUSY_TIMEOUT_MS = 30_000


def make_engine(url: str, *, durable: bool = True) -> Engine:
    """An engine for ``url``; for SQLite: WAL, foreign keys, a 30 s busy timeout, and
    transactions that begin with ``BEGIN IMMEDIATE``. ``durable``: each commit is synced to
    disk (``synchronous=FULL``); without it, only WAL checkpoints are (for bulk test
    fixtures)."""
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
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


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session whose work is committed at the end of the block (rolled back on error).

    It is a write transaction: it takes SQLite's write lock when it begins (``BEGIN
    IMMEDIATE``). Plain sessions are read transactions (``BEGIN``), which never wait for
    writers nor block them in WAL mode.
    """
    with factory() as session, session.begin():
        session.connection(execution_options={"immediate": True})
        yield session


def migrate(url: str) -> None:
    """Applies every Alembic migration to the database at ``url`` (idempotent)."""
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url)
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
            connection.commit()
    finally:
        engine.dispose()
