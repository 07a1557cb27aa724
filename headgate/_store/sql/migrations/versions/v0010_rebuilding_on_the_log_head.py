"""The log head says whether a rebuild is under way, so a write learns it from the
row it locks first, and live writes no longer move the projections' checkpoints.

A checkpoint's position now means something only while its projection is
rebuilding (how far the rebuild has folded); a live projection follows the
head in the same transaction as every append, so its row is left alone. The
flag is set from the checkpoints: a rebuild under way keeps writes refused.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    op.add_column(
        "headgate_log_head",
        sa.Column("rebuilding", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.execute(
        sa.text(
            "UPDATE headgate_log_head SET rebuilding = EXISTS ("
            "  SELECT 1 FROM headgate_projection_checkpoints AS c"
            "  WHERE c.rebuilding)"
        )
    )
