"""Schedules have an overlap policy and a start deadline for their tick jobs;
jobs can be serial (one tick job of a schedule at a time) and expire.

Schedules stored before allow overlap and have no deadline; jobs stored before
are not serial and have none. Expired jobs are finished: the index compaction
finds finished jobs by now names them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"

LIVE_TICKS = "state IN ('pending', 'running') AND periodic_schedule_id IS NOT NULL"
FINISHED = "state IN ('completed', 'failed', 'cancelled', 'expired')"


def upgrade() -> None:
    op.add_column(
        "headgate_schedules",
        sa.Column("overlap", sa.String(16), nullable=False, server_default=sa.text("'allow'")),
    )
    op.add_column("headgate_schedules", sa.Column("start_within_ms", sa.BigInteger))
    op.add_column(
        "headgate_jobs",
        sa.Column("serial", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.add_column("headgate_jobs", sa.Column("start_within_ms", sa.BigInteger))
    op.add_column("headgate_jobs", sa.Column("start_by_ms", sa.BigInteger))
    op.create_index(
        "ix_headgate_jobs_live_ticks",
        "headgate_jobs",
        ["periodic_schedule_id", "periodic_tick_ms"],
        sqlite_where=sa.text(LIVE_TICKS),
        postgresql_where=sa.text(LIVE_TICKS),
    )
    op.drop_index("ix_headgate_jobs_finished", table_name="headgate_jobs")
    op.create_index(
        "ix_headgate_jobs_finished",
        "headgate_jobs",
        ["updated_at_ms"],
        sqlite_where=sa.text(FINISHED),
        postgresql_where=sa.text(FINISHED),
    )
