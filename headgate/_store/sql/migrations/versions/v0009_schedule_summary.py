"""Schedules have a summary: what each is for, in a line, for operators.

Schedules stored before have none (the empty text).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    op.add_column(
        "headgate_schedules",
        sa.Column("summary", sa.String(500), nullable=False, server_default=sa.text("''")),
    )
