"""One job per (schedule, tick), as a fact of the database.

A unique index over the jobs' periodic origin, `(periodic_schedule_id,
periodic_tick_ms)` (rows without an origin hold NULLs, which never collide).
Before this revision an ordinary enqueue naming a tick the scheduler had
already fired made a second job for it. If the store holds such ticks the
revision stops with `DuplicateTickJobs`, listing each tick with its jobs, and
the whole upgrade (one transaction) changes nothing: the store stays at
revision 3, usable by the build it came from.

Why not clear the extra jobs' origin and go on: the projection must stay a
fold of the log, and the log still says both jobs credit the tick, so a
`headgate projections rebuild` would bring the duplicates back and fail on
this very index. Only the log's own history can settle it: once the extra
jobs are finished (cancel them with the earlier build) and compaction has
removed them (a day after they finish), the upgrade goes through.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from headgate._errors import DuplicateTickJobs

revision = "0004"
down_revision = "0003"

LIST_AT_MOST = 20
"""Ticks named in the error's message (all of them are on the exception)."""


def upgrade() -> None:
    duplicates = _duplicated_ticks()
    if duplicates:
        raise _refusal(duplicates)
    op.create_index(
        "ux_headgate_jobs_periodic_origin",
        "headgate_jobs",
        ["periodic_schedule_id", "periodic_tick_ms"],
        unique=True,
    )


def _duplicated_ticks() -> list[tuple[str, int, list[str]]]:
    """(schedule, tick, its jobs oldest first) for every tick with more than one job."""
    rows = op.get_bind().execute(
        sa.text(
            "SELECT j.periodic_schedule_id, j.periodic_tick_ms, j.job_id "
            "FROM headgate_jobs j JOIN ("
            "  SELECT periodic_schedule_id, periodic_tick_ms FROM headgate_jobs"
            "  WHERE periodic_schedule_id IS NOT NULL"
            "  GROUP BY periodic_schedule_id, periodic_tick_ms HAVING count(*) > 1"
            ") d ON d.periodic_schedule_id = j.periodic_schedule_id"
            " AND d.periodic_tick_ms = j.periodic_tick_ms "
            "ORDER BY j.periodic_schedule_id, j.periodic_tick_ms, j.created_at_ms, j.job_id"
        )
    )
    found: dict[tuple[str, int], list[str]] = {}
    for schedule_id, tick_ms, job_id in rows:
        found.setdefault((str(schedule_id), int(tick_ms)), []).append(str(job_id))
    return [(schedule_id, tick_ms, jobs) for (schedule_id, tick_ms), jobs in found.items()]


def _refusal(duplicates: list[tuple[str, int, list[str]]]) -> DuplicateTickJobs:
    listed = "; ".join(
        f"schedule {schedule_id!r} tick {tick_ms}: jobs {', '.join(jobs)}"
        for schedule_id, tick_ms, jobs in duplicates[:LIST_AT_MOST]
    )
    more = len(duplicates) - LIST_AT_MOST
    if more > 0:
        listed += f"; and {more} more"
    return DuplicateTickJobs(
        f"schema revision 0004 (one job per tick) found {len(duplicates)} tick(s) with more "
        f"than one job, made by enqueues that named a tick already fired: {listed}. Nothing "
        "was changed; the store stays at revision 0003. To resolve it, with the build you "
        "upgraded from: keep each tick's own job (the one whose unique_key is "
        "'periodic:<schedule>:<tick>'), cancel the others (headgate jobs cancel JOB_ID), and "
        "start this build again once compaction has removed them (a day after they finish)",
        duplicates,
    )
