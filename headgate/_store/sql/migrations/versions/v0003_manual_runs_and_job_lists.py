"""Manual runs name their schedule, and the operators' job lists have indexes.

Jobs gain `run_now_schedule_id` (the schedule whose Enqueue now made the
job), with a partial index of a schedule's manual runs newest first; jobs
made before stay unlinked, as their events never said which schedule made
them. The jobs list, newest first, gets an index per filter an operator
reaches for with many jobs stored: by state (all but completed, which most
jobs are) and by schedule (a schedule's tick jobs).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"

RUN_NOW = "run_now_schedule_id IS NOT NULL"
PERIODIC = "periodic_schedule_id IS NOT NULL"
NOT_COMPLETED = "state <> 'completed'"


def upgrade() -> None:
    op.create_index(
        "ix_headgate_jobs_state_created",
        "headgate_jobs",
        ["state", "created_at_ms", "job_id"],
        sqlite_where=sa.text(NOT_COMPLETED),
        postgresql_where=sa.text(NOT_COMPLETED),
    )
    op.create_index(
        "ix_headgate_jobs_schedule_created",
        "headgate_jobs",
        ["periodic_schedule_id", "created_at_ms", "job_id"],
        sqlite_where=sa.text(PERIODIC),
        postgresql_where=sa.text(PERIODIC),
    )
    op.add_column("headgate_jobs", sa.Column("run_now_schedule_id", sa.String(255)))
    op.create_index(
        "ix_headgate_jobs_run_now",
        "headgate_jobs",
        ["run_now_schedule_id", "created_at_ms", "job_id"],
        sqlite_where=sa.text(RUN_NOW),
        postgresql_where=sa.text(RUN_NOW),
    )
