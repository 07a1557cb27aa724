"""Each schedule's runs: what became of the job each tick or Enqueue now made.

`headgate_schedule_runs` holds a row per job of a schedule (the
`schedule_runs` projection), ordered per schedule by its enqueue's log
position, and its tick runs not settled yet (what a late run is looked for
among) on an index of their own. The runs already in the log get the rows a fold of it makes: the
events that settled them were written before they said their schedule, so
each reads `enqueued` and readers take its outcome from its job.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from headgate._domain.streams import JOB_PREFIX

revision = "0023"
down_revision = "0022"

WAITING = "state = 'enqueued' AND tick_ms IS NOT NULL"


def upgrade() -> None:
    op.create_table(
        "headgate_schedule_runs",
        sa.Column("job_id", sa.String(255), primary_key=True),
        sa.Column("schedule_id", sa.String(255), nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("tick_ms", sa.BigInteger),
        sa.Column("manual", sa.Boolean, nullable=False),
        sa.Column("enqueued_at_ms", sa.BigInteger, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("started_at_ms", sa.BigInteger),
        sa.Column("finished_at_ms", sa.BigInteger),
        sa.Column("error_type", sa.String(255)),
        sa.Column("updated_at_ms", sa.BigInteger, nullable=False),
    )
    op.create_index(
        "ix_headgate_schedule_runs_schedule",
        "headgate_schedule_runs",
        ["schedule_id", "position"],
    )
    op.create_index(
        "ix_headgate_schedule_runs_waiting",
        "headgate_schedule_runs",
        ["schedule_id", "tick_ms"],
        sqlite_where=sa.text(WAITING),
        postgresql_where=sa.text(WAITING),
    )
    op.execute(
        sa.text(
            "INSERT INTO headgate_schedule_runs (job_id, schedule_id, position, tick_ms, "
            "manual, enqueued_at_ms, state, attempts, started_at_ms, finished_at_ms, "
            "error_type, updated_at_ms) "
            "SELECT jobs.job_id, COALESCE(jobs.periodic_schedule_id, jobs.run_now_schedule_id), "
            "events.position, jobs.periodic_tick_ms, jobs.periodic_schedule_id IS NULL, "
            "events.recorded_at_ms, 'enqueued', 0, NULL, NULL, NULL, events.recorded_at_ms "
            "FROM headgate_jobs AS jobs JOIN headgate_events AS events "
            "ON events.stream_id = :prefix || jobs.job_id AND events.version = 1 "
            "WHERE jobs.periodic_schedule_id IS NOT NULL "
            "OR jobs.run_now_schedule_id IS NOT NULL"
        ).bindparams(prefix=JOB_PREFIX)
    )
    op.execute(
        "INSERT INTO headgate_projection_checkpoints (name, position, rebuilding) "
        "SELECT 'schedule_runs', head.position, false FROM headgate_log_head AS head "
        "WHERE head.id = 1"
    )
