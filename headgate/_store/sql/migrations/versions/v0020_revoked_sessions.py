"""The console's logouts hold in every process and across restarts.

A console session is a signed cookie that any process sharing the session
secret accepts: its end is kept in the store, `headgate_revoked_sessions`, one
row per ended session until it would have expired anyway.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"


def upgrade() -> None:
    op.create_table(
        "headgate_revoked_sessions",
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("expires_at_ms", sa.BigInteger, nullable=False),
    )
    op.create_index(
        "ix_headgate_revoked_sessions_expires", "headgate_revoked_sessions", ["expires_at_ms"]
    )
