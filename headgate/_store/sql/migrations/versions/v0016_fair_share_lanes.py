"""Fair share keeps each lane's current turn.

A lane is a (queue, priority); its current turn is the highest turn a claim
has taken in it (`queue_turns`, operational, like a claim), so it never falls
back when a lane's pending jobs run out. A partition's latest turn is read
per lane, so its index takes the priority; the index of pending partitioned
turns, the old current turn's source, goes. Each lane starts at the highest
turn among its running jobs.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"

LIVE_PARTITIONED = "state IN ('pending', 'running') AND partition_key IS NOT NULL"


def upgrade() -> None:
    op.create_table(
        "headgate_queue_turns",
        sa.Column("queue", sa.String(128), primary_key=True),
        sa.Column("priority", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("turn", sa.BigInteger, nullable=False),
    )
    op.execute(
        "INSERT INTO headgate_queue_turns (queue, priority, turn) "
        "SELECT queue, priority, MAX(fair_turn) FROM headgate_jobs "
        "WHERE state = 'running' AND fair_turn > 0 GROUP BY queue, priority"
    )
    op.drop_index("ix_headgate_jobs_queue_turns", table_name="headgate_jobs")
    op.drop_index("ix_headgate_jobs_partition_turns", table_name="headgate_jobs")
    op.create_index(
        "ix_headgate_jobs_partition_turns",
        "headgate_jobs",
        ["queue", "partition_key", "priority", "fair_turn"],
        sqlite_where=sa.text(LIVE_PARTITIONED),
        postgresql_where=sa.text(LIVE_PARTITIONED),
    )
