"""The jobs list is searched by unique key on an index.

A search by unique key finds finished jobs too (the live unique index holds only
pending and running ones), newest first.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"

HAS_UNIQUE_KEY = "unique_key IS NOT NULL"


def upgrade() -> None:
    op.create_index(
        "ix_headgate_jobs_unique_key",
        "headgate_jobs",
        ["unique_key", "created_at_ms", "job_id"],
        sqlite_where=sa.text(HAS_UNIQUE_KEY),
        postgresql_where=sa.text(HAS_UNIQUE_KEY),
    )
