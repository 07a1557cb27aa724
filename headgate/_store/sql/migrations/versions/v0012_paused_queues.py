"""Queues can be paused: a table of the paused ones, which claims read.

Nothing in the log folds into it yet, so its projection starts caught up.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    op.create_table(
        "headgate_paused_queues",
        sa.Column("queue", sa.String(128), primary_key=True),
        sa.Column("note", sa.String(255), nullable=False),
        sa.Column("paused_at_ms", sa.BigInteger, nullable=False),
    )
    op.execute(
        "INSERT INTO headgate_projection_checkpoints (name, position, rebuilding) "
        "SELECT 'paused_queues', head.position, false FROM headgate_log_head AS head "
        "WHERE head.id = 1"
    )
