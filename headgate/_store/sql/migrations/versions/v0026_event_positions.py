"""PostgreSQL draws log positions from a sequence, not from the log head row.

Writers no longer take turns on one row (`postgresql.SequenceOrder`): the
sequence starts after the last position the head handed out. SQLite keeps
its head row and has no sequences.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"

SEQUENCE = "headgate_event_positions"


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    op.execute(sa.text(f"CREATE SEQUENCE IF NOT EXISTS {SEQUENCE} START WITH 1"))
    last = bind.execute(
        sa.text(
            "SELECT greatest((SELECT position FROM headgate_log_head WHERE id = 1),"
            " (SELECT coalesce(max(position), 0) FROM headgate_events))"
        )
    ).scalar_one()
    if last:
        bind.execute(
            sa.text("SELECT setval(:sequence, :last)"), {"sequence": SEQUENCE, "last": last}
        )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    bind.execute(
        sa.text(
            "UPDATE headgate_log_head SET position ="
            " (SELECT coalesce(max(position), 0) FROM headgate_events) WHERE id = 1"
        )
    )
    op.execute(sa.text(f"DROP SEQUENCE IF EXISTS {SEQUENCE}"))
