"""The log head says whether a rebuild is under way, so a write learns it from the
row it locks first, and live writes no longer move the projections' checkpoints.
A rebuild of the jobs projection keeps the claims of running jobs in a table of
their own: claims are the job rows' state now, not events.

A checkpoint's position now means something only while its projection is
rebuilding (how far the rebuild has folded); a live projection follows the
head in the same transaction as every append, so its row is left alone. The
flag is set from the checkpoints: a rebuild under way, or a projection behind
the head, keeps writes refused until `headgate projections rebuild`.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    op.create_table(
        "headgate_rebuild_claims",
        sa.Column("job_id", sa.String(255), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("worker_id", sa.String(128), nullable=False),
        sa.Column("deadline_ms", sa.BigInteger),
        sa.Column("updated_at_ms", sa.BigInteger, nullable=False),
    )
    op.add_column(
        "headgate_log_head",
        sa.Column("rebuilding", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    # Until now a projection behind the head (a store carried over from before
    # the checkpoints, say) refused writes as one rebuilding does: say so.
    op.execute(
        sa.text(
            "UPDATE headgate_projection_checkpoints SET rebuilding = true"
            " WHERE position <> (SELECT position FROM headgate_log_head WHERE id = 1)"
        )
    )
    op.execute(
        sa.text(
            "UPDATE headgate_log_head SET rebuilding = EXISTS ("
            "  SELECT 1 FROM headgate_projection_checkpoints AS c"
            "  WHERE c.rebuilding)"
        )
    )
