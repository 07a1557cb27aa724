"""A job's tags (`JobOptions.tags`), as canonical JSON text."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"


def upgrade() -> None:
    op.add_column("headgate_jobs", sa.Column("tags", sa.Text))


def downgrade() -> None:
    op.drop_column("headgate_jobs", "tags")
