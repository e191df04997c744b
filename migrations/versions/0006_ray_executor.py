"""Remote run processes (the Ray executor): a run carries the hash of its run token, the
seq of the newest report batch it stored, the node it runs on and when it last reported;
a worker names its executor and, for Ray, the cluster's nodes.

Revision ID: 0006_ray_executor
Revises: 0005_sweeps
Create Date: 2026-12-04 03:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_ray_executor"
down_revision: str | None = "0005_sweeps"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("token_hash", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("report_seq", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("node", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("reported_at", sa.Float(), nullable=True))
    with op.batch_alter_table("workers") as batch:
        batch.add_column(
            sa.Column("executor", sa.String(length=16), nullable=False, server_default="local")
        )
        batch.add_column(sa.Column("cluster", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("cluster")
        batch.drop_column("executor")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("reported_at")
        batch.drop_column("node")
        batch.drop_column("report_seq")
        batch.drop_column("token_hash")
