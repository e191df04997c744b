"""Env steps as 64-bit integers on PostgreSQL (a run's steps pass 2**31).

SQLite's INTEGER is already 64-bit whatever the declared type, so this changes nothing there
(and rewrites no table).

Revision ID: 0003_postgres_wide_steps
Revises: 0002_service_events
Create Date: 2026-12-03 14:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_postgres_wide_steps"
down_revision: str | None = "0002_service_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP_COLUMNS = (
    ("runs", "steps"),
    ("runs", "total_steps"),
    ("metrics", "step"),
    ("metric_rollups", "first_step"),
    ("metric_rollups", "last_step"),
    ("videos", "step"),
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column in STEP_COLUMNS:
        op.alter_column(table, column, type_=sa.BigInteger(), existing_type=sa.Integer())


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column in STEP_COLUMNS:
        op.alter_column(table, column, type_=sa.Integer(), existing_type=sa.BigInteger())
