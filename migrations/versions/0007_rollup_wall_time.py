"""Rollups carry the wall time of their last point, so that a downsampled read needs no
second lookup per output point (filled in for the rollups already stored).

Revision ID: 0007_rollup_wall_time
Revises: 0006_ray_executor
Create Date: 2026-12-04 11:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_rollup_wall_time"
down_revision: str | None = "0006_ray_executor"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("metric_rollups") as batch:
        batch.add_column(sa.Column("last_wall_time", sa.Float(), nullable=True))
    op.execute(
        "UPDATE metric_rollups SET last_wall_time = (SELECT m.wall_time FROM metrics AS m "
        "WHERE m.run_id = metric_rollups.run_id AND m.key = metric_rollups.key "
        "AND m.step = metric_rollups.last_step)"
    )


def downgrade() -> None:
    with op.batch_alter_table("metric_rollups") as batch:
        batch.drop_column("last_wall_time")
