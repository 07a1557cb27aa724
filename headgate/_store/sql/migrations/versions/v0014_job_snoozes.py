"""Jobs count their snoozes (a handler's `Snooze`); jobs stored before have none."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    op.add_column(
        "headgate_jobs",
        sa.Column("snoozes", sa.Integer, nullable=False, server_default=sa.text("0")),
    )
