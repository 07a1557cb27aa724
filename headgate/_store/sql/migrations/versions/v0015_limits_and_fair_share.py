"""Fleet-wide concurrency limits, rate classes and fair share between partitions;
the activity roll-up.

Jobs and schedules gain a partition key and a rate class; jobs a fair-share
turn, which the claim index orders by after priority (jobs stored before take
turn 0, the order they had). The limit tables are projections of events no
earlier build wrote, so they start caught up; `rate_starts` is operational, as
is `activity`, the per-minute roll-up, which reads the enqueue and attempt
histories by their time.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"

CLAIMABLE = "state = 'pending'"
LIVE_PARTITIONED = "state IN ('pending', 'running') AND partition_key IS NOT NULL"
PENDING_PARTITIONED = "state = 'pending' AND partition_key IS NOT NULL"


def upgrade() -> None:
    for table in ("headgate_jobs", "headgate_schedules"):
        op.add_column(table, sa.Column("partition_key", sa.String(128)))
        op.add_column(table, sa.Column("rate_class", sa.String(128)))
    op.add_column(
        "headgate_jobs",
        sa.Column("fair_turn", sa.BigInteger, nullable=False, server_default=sa.text("0")),
    )
    op.drop_index("ix_headgate_jobs_claimable", table_name="headgate_jobs")
    op.create_index(
        "ix_headgate_jobs_claimable",
        "headgate_jobs",
        ["queue", sa.text("priority DESC"), "fair_turn", "run_at_ms", "job_id"],
        sqlite_where=sa.text(CLAIMABLE),
        postgresql_where=sa.text(CLAIMABLE),
    )
    op.create_index(
        "ix_headgate_jobs_partition_turns",
        "headgate_jobs",
        ["queue", "partition_key", "fair_turn"],
        sqlite_where=sa.text(LIVE_PARTITIONED),
        postgresql_where=sa.text(LIVE_PARTITIONED),
    )
    op.create_index(
        "ix_headgate_jobs_queue_turns",
        "headgate_jobs",
        ["queue", "fair_turn"],
        sqlite_where=sa.text(PENDING_PARTITIONED),
        postgresql_where=sa.text(PENDING_PARTITIONED),
    )
    op.create_table(
        "headgate_concurrency_limits",
        sa.Column("scope", sa.String(512), primary_key=True),
        sa.Column("queue", sa.String(128)),
        sa.Column("kind", sa.String(128)),
        sa.Column("partition_key", sa.String(128)),
        sa.Column("max_running", sa.Integer, nullable=False),
        sa.Column("set_at_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "headgate_rate_limits",
        sa.Column("rate_class", sa.String(128), primary_key=True),
        sa.Column("max_starts", sa.Integer, nullable=False),
        sa.Column("per_ms", sa.BigInteger, nullable=False),
        sa.Column("set_at_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "headgate_rate_starts",
        sa.Column("rate_class", sa.String(128), nullable=False),
        sa.Column("started_at_ms", sa.BigInteger, nullable=False),
        sa.Column("job_id", sa.String(255), nullable=False),
    )
    op.create_index(
        "ix_headgate_rate_starts", "headgate_rate_starts", ["rate_class", "started_at_ms"]
    )
    op.create_table(
        "headgate_activity",
        sa.Column("minute_ms", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("series", sa.String(32), primary_key=True),
        sa.Column("key", sa.String(512), primary_key=True),
        sa.Column("value", sa.Float, nullable=False),
    )
    op.create_index(
        "ix_headgate_enqueue_history_recorded", "headgate_enqueue_history", ["recorded_at_ms"]
    )
    op.create_index("ix_headgate_job_attempts_ended", "headgate_job_attempts", ["ended_at_ms"])
    for name in ("concurrency_limits", "rate_limits"):
        op.execute(
            "INSERT INTO headgate_projection_checkpoints (name, position, rebuilding) "
            f"SELECT '{name}', head.position, false FROM headgate_log_head AS head "
            "WHERE head.id = 1"
        )
