"""Pending jobs past their start deadline are found by an index.

A worker expires the pending jobs whose `start_by_ms` has passed, in bulk,
before it claims (so they take none of its slots): the partial index holds
only pending jobs that have a start deadline, by that deadline.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"

PENDING_WITH_DEADLINE = "state = 'pending' AND start_by_ms IS NOT NULL"


def upgrade() -> None:
    op.create_index(
        "ix_headgate_jobs_start_by",
        "headgate_jobs",
        ["start_by_ms", "job_id"],
        sqlite_where=sa.text(PENDING_WITH_DEADLINE),
        postgresql_where=sa.text(PENDING_WITH_DEADLINE),
    )
