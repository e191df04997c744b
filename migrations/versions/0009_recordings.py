"""Activation recordings: one row per recording job of a run's checkpoint (its request,
status, the manifest and size of its files once stored).

Revision ID: 0009_recordings
Revises: 0008_tracked_runs
Create Date: 2026-12-05 14:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_recordings"
down_revision: str | None = "0008_tracked_runs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "recordings",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "run_id",
            sa.String(length=32),
            sa.ForeignKey("runs.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("n_envs", sa.Integer(), nullable=False),
        sa.Column("episode_length", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("video", sa.Boolean(), nullable=False),
        sa.Column("estimated_bytes", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=True),
        sa.Column("manifest", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("finished_at", sa.Float(), nullable=True),
    )
    op.create_index("ix_recordings_run_id", "recordings", ["run_id"])
    op.create_index("ix_recordings_status_created", "recordings", ["status", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_recordings_status_created", table_name="recordings")
    op.drop_index("ix_recordings_run_id", table_name="recordings")
    op.drop_table("recordings")
