"""Workers say which kinds they run.

A worker's heartbeat row gains `kinds` (JSON, its handlers' kinds), so the
store knows which (queue, kind) a live worker serves and can tell the jobs no
live worker can run. A row an earlier build wrote has none: it is read as
serving every kind of its queues.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"


def upgrade() -> None:
    op.add_column("headgate_workers", sa.Column("kinds", sa.Text))
