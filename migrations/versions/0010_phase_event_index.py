"""An index of events by (run, type, seq): the newest ``phase`` event before a seq, which
every metrics read returns, is then a seek instead of a scan of the run's whole stream.

Revision ID: 0010_phase_event_index
Revises: 0009_recordings
Create Date: 2026-12-07 02:20:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010_phase_event_index"
down_revision: str | None = "0009_recordings"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_events_run_type_seq", "events", ["run_id", "type", "seq"])


def downgrade() -> None:
    op.drop_index("ix_events_run_type_seq", table_name="events")
