"""Enqueue routes a kind by its handler's declaration, not by live workers.

Each runtime with handlers records them at start in
`headgate_handler_declarations`, one row per kind and declarations group, so
a process without the handler enqueues its job on the queue (and with the
defaults) the handler declares, whether or not a worker is alive.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"


def upgrade() -> None:
    op.create_table(
        "headgate_handler_declarations",
        sa.Column("kind", sa.String(128), primary_key=True),
        sa.Column("declared_by", sa.String(128), primary_key=True),
        sa.Column("queue", sa.String(128), nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("start_within_ms", sa.BigInteger),
        sa.Column("partition_key", sa.String(128)),
        sa.Column("rate_class", sa.String(128)),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("declared_at_ms", sa.BigInteger, nullable=False),
    )
