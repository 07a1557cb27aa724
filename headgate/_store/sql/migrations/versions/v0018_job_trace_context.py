"""Jobs carry their trace context.

A job's row gains `trace_context` (the W3C trace context its enqueue or tick
span propagated, as JSON text), so its attempts' spans continue or link to
that trace. A job enqueued before has none: its attempts start traces of
their own.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"


def upgrade() -> None:
    op.add_column("headgate_jobs", sa.Column("trace_context", sa.String(1024)))
