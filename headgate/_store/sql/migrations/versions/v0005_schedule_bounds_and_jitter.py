"""Schedules gain start and end bounds, jitter, and a finished flag.

`start_at_ms` and `end_at_ms` bound the ticks a schedule fires (NULL:
unbounded), `jitter_ms` spreads their instants (0: none), and `finished`
marks a schedule whose next tick is past its end. The due index leaves
finished schedules out, so the sweep never reads them again. Existing
schedules are unbounded, unjittered and unfinished, as their events say.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"

DUE = "NOT paused AND NOT deleted AND NOT finished"
SCHEDULES = "headgate_schedules"


def upgrade() -> None:
    op.add_column(SCHEDULES, sa.Column("start_at_ms", sa.BigInteger))
    op.add_column(SCHEDULES, sa.Column("end_at_ms", sa.BigInteger))
    op.add_column(
        SCHEDULES,
        sa.Column("jitter_ms", sa.Integer, nullable=False, server_default=sa.text("0")),
    )
    op.add_column(
        SCHEDULES,
        sa.Column("finished", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.drop_index("ix_headgate_schedules_due_order", SCHEDULES)
    op.create_index(
        "ix_headgate_schedules_due_order",
        SCHEDULES,
        ["due_at_ms", "schedule_id"],
        sqlite_where=sa.text(DUE),
        postgresql_where=sa.text(DUE),
    )
