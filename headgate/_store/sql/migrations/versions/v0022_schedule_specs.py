"""The live schedules' specs are read on an index of their own.

The store-wide ceilings (`max_schedules`, `max_ticks_per_s`) weigh the live
schedules by spec at each schedule write: a partial index of the specs of the
schedules neither deleted nor finished answers that without reading the rows.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"

LIVE = "NOT deleted AND NOT finished"


def upgrade() -> None:
    op.create_index(
        "ix_headgate_schedules_live_specs",
        "headgate_schedules",
        ["spec"],
        sqlite_where=sa.text(LIVE),
        postgresql_where=sa.text(LIVE),
    )
