"""Jobs have a priority: higher is claimed first within a queue.

Jobs stored before have priority 0, the default, and schedules none (their
jobs take the default). The claim index leads with the priority, so a claim
still reads pending jobs in the order it takes them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"

CLAIMABLE = "state = 'pending'"


def upgrade() -> None:
    op.add_column(
        "headgate_jobs",
        sa.Column("priority", sa.Integer, nullable=False, server_default=sa.text("0")),
    )
    op.add_column("headgate_schedules", sa.Column("priority", sa.Integer))
    op.drop_index("ix_headgate_jobs_claimable", table_name="headgate_jobs")
    op.create_index(
        "ix_headgate_jobs_claimable",
        "headgate_jobs",
        ["queue", sa.text("priority DESC"), "run_at_ms", "job_id"],
        sqlite_where=sa.text(CLAIMABLE),
        postgresql_where=sa.text(CLAIMABLE),
    )
