"""Workers report which runs hold each of their devices (and a GPU's use) with their
heartbeat, for ``GET /api/health``.

Revision ID: 0004_worker_device_use
Revises: 0003_postgres_wide_steps
Create Date: 2026-12-03 16:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_worker_device_use"
down_revision: str | None = "0003_postgres_wide_steps"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("device_use", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("device_use")
