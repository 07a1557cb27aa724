"""Schedules say whether the host's code declares them, and what it declares.

`declared` is the definition the code declares (its flat fields as JSON),
`declared_by` the declarations group of that code, and `undeclared_at_ms`
when a runtime of the group started without declaring it. Schedules stored
before have none: only operators define them, as then. Two small partial
indexes find a group's declared schedules (at a runtime's start) and count the
undeclared ones (a metric, at every scrape).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"

SCHEDULES = "headgate_schedules"
DECLARED = "declared_by IS NOT NULL"
UNDECLARED = "undeclared_at_ms IS NOT NULL AND NOT deleted"


def upgrade() -> None:
    op.add_column(SCHEDULES, sa.Column("declared", sa.Text))
    op.add_column(SCHEDULES, sa.Column("declared_by", sa.String(128)))
    op.add_column(SCHEDULES, sa.Column("undeclared_at_ms", sa.BigInteger))
    op.create_index(
        "ix_headgate_schedules_declared",
        SCHEDULES,
        ["declared_by", "schedule_id"],
        sqlite_where=sa.text(DECLARED),
        postgresql_where=sa.text(DECLARED),
    )
    op.create_index(
        "ix_headgate_schedules_undeclared",
        SCHEDULES,
        ["schedule_id"],
        sqlite_where=sa.text(UNDECLARED),
        postgresql_where=sa.text(UNDECLARED),
    )
