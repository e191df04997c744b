"""Service events: one sequence of run changes (created, status, progress, updated, deleted)
across all runs, for ``WS /api/events``.

Revision ID: 0002_service_events
Revises: 0001
Create Date: 2026-12-03 14:50:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_service_events"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # AUTOINCREMENT: a seq is never reused, also after the oldest events are pruned.
    op.create_table(
        "service_events",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("type", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
        sqlite_autoincrement=True,
    )


def downgrade() -> None:
    op.drop_table("service_events")
