"""The jobs list is searched by unique key, and read by kind, on indexes.

A search by unique key finds finished jobs too (the live unique index holds only
pending and running ones), newest first. A kind's jobs, and their counts per
state, are read by (kind, state): all but its pending ones, which the state
index holds already, and which the workers' reads of pending jobs by kind must
keep finding on the claim and deadline indexes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"

HAS_UNIQUE_KEY = "unique_key IS NOT NULL"
NOT_PENDING = "state <> 'pending'"


def upgrade() -> None:
    op.create_index(
        "ix_headgate_jobs_unique_key",
        "headgate_jobs",
        ["unique_key", "created_at_ms", "job_id"],
        sqlite_where=sa.text(HAS_UNIQUE_KEY),
        postgresql_where=sa.text(HAS_UNIQUE_KEY),
    )
    op.create_index(
        "ix_headgate_jobs_kind_state",
        "headgate_jobs",
        ["kind", "state", "created_at_ms", "job_id"],
        sqlite_where=sa.text(NOT_PENDING),
        postgresql_where=sa.text(NOT_PENDING),
    )
