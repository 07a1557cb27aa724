"""A failed attempt keeps its traceback.

`headgate_job_attempts` gains `traceback` (where the attempt's exception was
raised, bounded; for a timeout, where its handler was at the deadline). The
attempts recorded before have none.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"


def upgrade() -> None:
    op.add_column("headgate_job_attempts", sa.Column("traceback", sa.Text))
