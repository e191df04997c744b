"""Alembic environment: applies ``migrations/versions`` to the service's database.

The URL comes from the Alembic config (``server.store.db.migrate`` sets it from the settings).
"""

from alembic import context
from sqlalchemy import Connection, engine_from_config, pool

from server.store.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection) -> None:
    # SQLite: a batch migration rebuilds a table (copy, drop the old one, rename); with foreign
    # keys on, dropping the old ``runs`` would cascade-delete every row that refers to a run
    # (metrics, events, checkpoints). They are off while migrating, as SQLite asks for table
    # rebuilds; the pragma only takes effect outside a transaction.
    toggle = connection.dialect.name == "sqlite" and not connection.in_transaction()
    if toggle:
        _sqlite_foreign_keys(connection, on=False)
    try:
        context.configure(
            connection=connection, target_metadata=target_metadata, render_as_batch=True
        )
        with context.begin_transaction():
            context.run_migrations()
    finally:
        if toggle and not connection.in_transaction():
            _sqlite_foreign_keys(connection, on=True)


def _sqlite_foreign_keys(connection: Connection, *, on: bool) -> None:
    raw = connection.connection.driver_connection  # outside SQLAlchemy's transaction
    assert raw is not None
    raw.execute(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = engine_from_config(
        config.get_section(config.config_ini_section, {}),
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with engine.connect() as connection:
        _run(connection)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
