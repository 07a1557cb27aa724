"""Jobs that Headgate runs: their lifecycle columns, attempts, crash blame, workers.

Jobs gain where they stand (attempts, crash count, run time, options, the
worker running one and its deadline, the stream version, the result, the last
error); the unique-key and finished-job indexes now count `running` as
unfinished; an index for claiming (pending jobs by queue and run time) and one
of running jobs by worker. New: the per-attempt history, the crash blame per
fingerprint, and the workers' heartbeat rows. Existing jobs were only ever
enqueued (version 1) or finished (version 2), and run as soon as enqueued.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"

LIVE_UNIQUE_KEY = "state IN ('pending', 'running') AND unique_key IS NOT NULL"
FINISHED = "state IN ('completed', 'failed', 'cancelled')"


def upgrade() -> None:
    _schedule_options()
    _job_lifecycle()
    _job_indexes()
    _new_tables()


def _schedule_options() -> None:
    op.add_column("headgate_schedules", sa.Column("max_attempts", sa.Integer))
    op.add_column("headgate_schedules", sa.Column("timeout_ms", sa.BigInteger))


def _job_lifecycle() -> None:
    add = op.add_column
    jobs = "headgate_jobs"
    add(jobs, sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")))
    add(jobs, sa.Column("crash_count", sa.Integer, nullable=False, server_default=sa.text("0")))
    add(jobs, sa.Column("run_at_ms", sa.BigInteger, nullable=False, server_default=sa.text("0")))
    add(jobs, sa.Column("max_attempts", sa.Integer))
    add(jobs, sa.Column("timeout_ms", sa.BigInteger))
    add(jobs, sa.Column("worker_id", sa.String(128)))
    add(jobs, sa.Column("deadline_ms", sa.BigInteger))
    add(jobs, sa.Column("version", sa.Integer, nullable=False, server_default=sa.text("1")))
    add(jobs, sa.Column("result", sa.Text))
    add(jobs, sa.Column("error_type", sa.String(255)))
    add(jobs, sa.Column("error_message", sa.Text))
    op.execute(
        "UPDATE headgate_jobs SET run_at_ms = created_at_ms, "
        "version = CASE WHEN state = 'pending' THEN 1 ELSE 2 END"
    )


def _job_indexes() -> None:
    op.drop_index("ux_headgate_jobs_live_unique_key", "headgate_jobs")
    op.create_index(
        "ux_headgate_jobs_live_unique_key",
        "headgate_jobs",
        ["unique_key"],
        unique=True,
        sqlite_where=sa.text(LIVE_UNIQUE_KEY),
        postgresql_where=sa.text(LIVE_UNIQUE_KEY),
    )
    op.drop_index("ix_headgate_jobs_finished", "headgate_jobs")
    op.create_index(
        "ix_headgate_jobs_finished",
        "headgate_jobs",
        ["updated_at_ms"],
        sqlite_where=sa.text(FINISHED),
        postgresql_where=sa.text(FINISHED),
    )
    op.create_index(
        "ix_headgate_jobs_claimable",
        "headgate_jobs",
        ["queue", "run_at_ms", "job_id"],
        sqlite_where=sa.text("state = 'pending'"),
        postgresql_where=sa.text("state = 'pending'"),
    )
    op.create_index("ix_headgate_jobs_created", "headgate_jobs", ["created_at_ms", "job_id"])
    op.create_index(
        "ix_headgate_jobs_running",
        "headgate_jobs",
        ["worker_id"],
        sqlite_where=sa.text("state = 'running'"),
        postgresql_where=sa.text("state = 'running'"),
    )


def _new_tables() -> None:
    op.create_table(
        "headgate_workers",
        sa.Column("worker_id", sa.String(128), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("queues", sa.Text, nullable=False),
        sa.Column("started_at_ms", sa.BigInteger, nullable=False),
        sa.Column("heartbeat_at_ms", sa.BigInteger, nullable=False),
        sa.Column("expires_at_ms", sa.BigInteger, nullable=False),
        sa.Column("running", sa.Integer, nullable=False),
        sa.Column("overdue", sa.Integer, nullable=False),
    )
    op.create_table(
        "headgate_job_attempts",
        sa.Column("event_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("job_id", sa.String(255), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("worker_id", sa.String(128)),
        sa.Column("started_at_ms", sa.BigInteger),
        sa.Column("ended_at_ms", sa.BigInteger, nullable=False),
        sa.Column("error_type", sa.String(255)),
        sa.Column("error_message", sa.Text),
    )
    op.create_index("ix_headgate_job_attempts_job", "headgate_job_attempts", ["job_id", "event_id"])
    op.create_table(
        "headgate_crash_blame",
        sa.Column("fingerprint", sa.String(128), primary_key=True),
        sa.Column("blame_milli", sa.Integer, nullable=False),
        sa.Column("last_job_id", sa.String(255), nullable=False),
        sa.Column("updated_at_ms", sa.BigInteger, nullable=False),
    )
    # Nothing in the log yet folds into these two: they start caught up.
    op.execute(
        "INSERT INTO headgate_projection_checkpoints (name, position, rebuilding) "
        "SELECT name, head.position, false FROM "
        "(SELECT 'job_attempts' AS name UNION ALL SELECT 'crash_blame') AS names, "
        "headgate_log_head AS head WHERE head.id = 1"
    )
