"""The activity roll-up on SQL: its inputs read on indexes, its points in
`headgate_activity`."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, insert, select, text

from headgate._domain.activity import MINUTE_MS, RAN, ActivityPoint, MinuteRows
from headgate._store.port.activity import ActivityLog
from headgate._store.sql.database import Database
from headgate._store.sql.predicates import FINISHED_JOBS_WHERE, RUNNING_WHERE
from headgate._store.sql.schema import LIVE, activity

_history, _attempts, _jobs = LIVE.enqueue_history, LIVE.job_attempts, LIVE.jobs


class SqlActivityLog(ActivityLog):
    def __init__(self, database: Database) -> None:
        self._database = database

    def minute_rows(self, minute_ms: int) -> MinuteRows:
        end = minute_ms + MINUTE_MS
        ticks = select(_history.c.outcome, _history.c.recorded_at_ms - _history.c.tick_ms).where(
            _history.c.recorded_at_ms >= minute_ms, _history.c.recorded_at_ms < end
        )
        attempts = (
            select(_attempts.c.outcome, _attempts.c.started_at_ms, _jobs.c.run_at_ms)
            .select_from(_attempts.outerjoin(_jobs, _jobs.c.job_id == _attempts.c.job_id))
            .where(_attempts.c.ended_at_ms >= minute_ms, _attempts.c.ended_at_ms < end)
        )
        started_ended = select(func.count()).where(
            _attempts.c.ended_at_ms >= minute_ms,
            _attempts.c.started_at_ms >= minute_ms,
            _attempts.c.started_at_ms < end,
            _attempts.c.outcome.in_(sorted(RAN)),
        )
        expired = select(func.count()).where(
            text(FINISHED_JOBS_WHERE),
            _jobs.c.state == "expired",
            _jobs.c.updated_at_ms >= minute_ms,
            _jobs.c.updated_at_ms < end,
        )
        running = select(func.count()).where(
            text(RUNNING_WHERE), _jobs.c.updated_at_ms >= minute_ms, _jobs.c.updated_at_ms < end
        )
        with self._database.reading("reading the minute's activity") as connection:
            return MinuteRows(
                ticks=[(str(o), max(int(late), 0)) for o, late in connection.execute(ticks)],
                attempts=[
                    (str(outcome), _pickup(started, due))
                    for outcome, started, due in connection.execute(attempts)
                ],
                expired=int(connection.execute(expired).scalar_one()),
                started_ended=int(connection.execute(started_ended).scalar_one()),
                started_running=int(connection.execute(running).scalar_one()),
            )

    def record(
        self, minute_ms: int, points: Sequence[ActivityPoint], forget_before_ms: int
    ) -> None:
        rows = [
            {"minute_ms": p.minute_ms, "series": p.series, "key": p.key, "value": p.value}
            for p in points
        ]
        with self._database.serialised_write("recording the minute's activity") as connection:
            connection.execute(
                delete(activity).where(
                    (activity.c.minute_ms == minute_ms) | (activity.c.minute_ms < forget_before_ms)
                )
            )
            if rows:
                connection.execute(insert(activity), rows)

    def points(self, since_ms: int) -> list[ActivityPoint]:
        query = (
            select(activity.c.minute_ms, activity.c.series, activity.c.key, activity.c.value)
            .where(activity.c.minute_ms >= since_ms)
            .order_by(activity.c.minute_ms, activity.c.series, activity.c.key)
        )
        with self._database.reading("reading the activity") as connection:
            return [
                ActivityPoint(int(m), str(s), str(k), float(v))
                for m, s, k, v in connection.execute(query)
            ]

    def last_minute(self) -> int | None:
        with self._database.reading("reading the activity") as connection:
            found = connection.execute(select(func.max(activity.c.minute_ms))).scalar()
        return None if found is None else int(found)


def _pickup(started_at_ms: int | None, due_ms: int | None) -> int | None:
    """How long after it was due the attempt started, when the job's row still
    says when that was (its run_at moves on at a retry or a snooze)."""
    if started_at_ms is None or due_ms is None or due_ms > started_at_ms:
        return None
    return int(started_at_ms) - int(due_ms)
