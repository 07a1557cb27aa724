"""The one-job-per-tick index holds tick jobs only.

It held a row for every job, its origin NULL for all but a tick's, and every
change of a job's state writes a new entry into each index a row is in (a
claim and an end change columns other indexes are on): two entries of no use
per job run, in the WAL as on disk. Tick jobs alone are indexed now; a
lookup by (schedule, tick) names a schedule, so it is still found on it, and
two jobs of one tick still collide on it.

The live ticks' index, on the same columns, is made again after it: of two
indexes a query can use at one cost SQLite takes the newer, and the overlap
policies' reads must keep finding a schedule's live ticks on theirs.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"

ONE_PER_TICK = "ux_headgate_jobs_periodic_origin"
LIVE_TICKS_INDEX = "ix_headgate_jobs_live_ticks"
ORIGIN = ["periodic_schedule_id", "periodic_tick_ms"]
TICK_JOBS = "periodic_schedule_id IS NOT NULL"
LIVE_TICKS = "state IN ('pending', 'running') AND periodic_schedule_id IS NOT NULL"


def upgrade() -> None:
    op.drop_index(LIVE_TICKS_INDEX, table_name="headgate_jobs")
    op.drop_index(ONE_PER_TICK, table_name="headgate_jobs")
    op.create_index(
        ONE_PER_TICK,
        "headgate_jobs",
        ORIGIN,
        unique=True,
        sqlite_where=sa.text(TICK_JOBS),
        postgresql_where=sa.text(TICK_JOBS),
    )
    _create_live_ticks_index()


def downgrade() -> None:
    op.drop_index(LIVE_TICKS_INDEX, table_name="headgate_jobs")
    op.drop_index(ONE_PER_TICK, table_name="headgate_jobs")
    op.create_index(ONE_PER_TICK, "headgate_jobs", ORIGIN, unique=True)
    _create_live_ticks_index()


def _create_live_ticks_index() -> None:
    op.create_index(
        LIVE_TICKS_INDEX,
        "headgate_jobs",
        ORIGIN,
        sqlite_where=sa.text(LIVE_TICKS),
        postgresql_where=sa.text(LIVE_TICKS),
    )
