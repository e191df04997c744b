"""Tracked runs (``nnx_ppo.track``): a run trained by a script outside the service is
marked ``external`` (never claimed by a worker; ``crashed`` when its script goes silent).

Revision ID: 0008_tracked_runs
Revises: 0007_rollup_wall_time
Create Date: 2026-12-05 14:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_tracked_runs"
down_revision: str | None = "0007_rollup_wall_time"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column("external", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("external")
