"""Sweeps: the sweeps table, its events and its Optuna study's journal; runs carry their
sweep, trial number, trial values and a prune reason.

Revision ID: 0005_sweeps
Revises: 0004_worker_device_use
Create Date: 2026-12-03 14:55:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_sweeps"
down_revision: str | None = "0004_worker_device_use"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sweeps",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("base_total_steps", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("sweeps", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sweeps_status"), ["status"], unique=False)
        batch_op.create_index(batch_op.f("ix_sweeps_created_at"), ["created_at"], unique=False)
    op.create_table(
        "sweep_events",
        sa.Column("sweep_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=16), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["sweep_id"], ["sweeps.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("sweep_id", "seq"),
    )
    op.create_table(
        "sweep_journal",
        sa.Column("sweep_id", sa.String(length=32), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("log", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["sweep_id"], ["sweeps.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("sweep_id", "number"),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("sweep_id", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("trial", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("trial_params", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("prune_reason", sa.Text(), nullable=True))
        batch_op.create_index(batch_op.f("ix_runs_sweep_id"), ["sweep_id"], unique=False)
        batch_op.create_index("ix_runs_sweep_trial", ["sweep_id", "trial"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_sweep_trial")
        batch_op.drop_index(batch_op.f("ix_runs_sweep_id"))
        batch_op.drop_column("prune_reason")
        batch_op.drop_column("trial_params")
        batch_op.drop_column("trial")
        batch_op.drop_column("sweep_id")
    op.drop_table("sweep_journal")
    op.drop_table("sweep_events")
    with op.batch_alter_table("sweeps", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sweeps_created_at"))
        batch_op.drop_index(batch_op.f("ix_sweeps_status"))
    op.drop_table("sweeps")
