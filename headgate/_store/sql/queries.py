"""Queries over the projections: what the scheduler, the API and the console read.

Each query is a function of a Connection so it can run inside a write
transaction (seeing that transaction's own appends) or on its own
(`SqlReads`, the port's read side).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any, Final

from sqlalchemy import Engine, Select, func, select, text
from sqlalchemy.engine import Connection

from headgate._domain.admission import check_limit, could_be_stored
from headgate._domain.cursors import decode_cursor, encode_cursor
from headgate._projections import EnqueueHistoryRow, JobRow, ScheduleRow
from headgate._projections.enqueue_history import KEEP_PER_SCHEDULE
from headgate._store.port import Page, Reads
from headgate._store.sql.backends import backend_of
from headgate._store.sql.engine import translated_errors
from headgate._store.sql.projector import CHUNK
from headgate._store.sql.schema import DUE_INDEX_WHERE, LIVE, LIVE_UNIQUE_KEY_WHERE

HISTORY_CURSOR: Final = "enqueue-events"
SCHEDULES_CURSOR: Final = "schedules"

_schedules, _jobs, _history, _quarantine = (
    LIVE.schedules,
    LIVE.jobs,
    LIVE.enqueue_history,
    LIVE.quarantine,
)
_LIVE_AND_UNPAUSED: Final = text(DUE_INDEX_WHERE)
"""Written exactly as the due index's predicate: the databases use a partial
index only for a query whose condition matches it (SQLite textually), and
SQLAlchemy's own rendering of `paused IS false` does not."""
_LIVE_UNIQUE_KEY: Final = text(LIVE_UNIQUE_KEY_WHERE)
_SCHEDULE_ROW_COLUMNS: Final = tuple(_schedules.c[field.name] for field in fields(ScheduleRow))


def schedule(connection: Connection, schedule_id: str) -> ScheduleRow | None:
    if not could_be_stored(schedule_id):
        return None
    row = (
        connection.execute(select(_schedules).where(_schedules.c.schedule_id == schedule_id))
        .mappings()
        .first()
    )
    return None if row is None else ScheduleRow(**row)


def schedules_page(
    connection: Connection, limit: int, cursor: str | None, maximum: int = 200
) -> Page[ScheduleRow]:
    """Live (not deleted) schedules ordered by id."""
    check_limit(limit, maximum)
    query = select(_schedules).where(_schedules.c.deleted.is_(False))
    if cursor is not None:
        after = decode_cursor(SCHEDULES_CURSOR, cursor, str)
        query = query.where(_schedules.c.schedule_id > after)
    rows = connection.execute(query.order_by(_schedules.c.schedule_id).limit(limit + 1)).mappings()
    items = [ScheduleRow(**row) for row in rows]
    more = len(items) > limit
    items = items[:limit]
    next_cursor = encode_cursor(SCHEDULES_CURSOR, items[-1].schedule_id) if more else None
    return Page(items, next_cursor)


def due_query(now_ms: int, limit: int) -> Select[Any]:
    """The bounded due read, oldest due first. The partial due index is in this
    order, so the read stops after `limit` rows however many schedules exist."""
    return (
        select(*_SCHEDULE_ROW_COLUMNS)
        .where(_LIVE_AND_UNPAUSED, _schedules.c.due_at_ms <= now_ms)
        .order_by(_schedules.c.due_at_ms, _schedules.c.schedule_id)
        .limit(limit)
    )


def due_schedules(connection: Connection, now_ms: int, limit: int) -> list[ScheduleRow]:
    # Positional: the columns are selected in ScheduleRow's field order, and
    # building rows from plain tuples is what this hot read spends its time on.
    return [ScheduleRow(*row) for row in connection.execute(due_query(now_ms, limit))]


def earliest_due_query() -> Select[Any]:
    return select(func.min(_schedules.c.due_at_ms)).where(_LIVE_AND_UNPAUSED)


def earliest_due_at(connection: Connection) -> int | None:
    value = connection.execute(earliest_due_query()).scalar()
    return None if value is None else int(value)


def job(connection: Connection, job_id: str) -> JobRow | None:
    if not could_be_stored(job_id):
        return None
    row = connection.execute(select(_jobs).where(_jobs.c.job_id == job_id)).mappings().first()
    return None if row is None else JobRow(**row)


def live_jobs_by_unique_key(connection: Connection, keys: Iterable[str]) -> dict[str, str]:
    """unique key -> id of the pending job holding it."""
    found: dict[str, str] = {}
    wanted = list(dict.fromkeys(keys))
    for start in range(0, len(wanted), CHUNK):
        query = _live_holders(connection, wanted[start : start + CHUNK])
        found.update({str(key): str(job_id) for key, job_id in connection.execute(query) if job_id})
    return found


def _live_holders(connection: Connection, keys: list[str]) -> Select[Any]:
    """(key, the pending job holding it or None), per key: one probe of the
    partial unique index each."""
    wanted = backend_of(connection).each_of(keys, _jobs.c.unique_key)
    holder = select(_jobs.c.job_id).where(_LIVE_UNIQUE_KEY, _jobs.c.unique_key == wanted.c.value)
    return select(wanted.c.value, holder.scalar_subquery())


def pending_counts(connection: Connection, queues: Iterable[str]) -> dict[str, int]:
    wanted = list(dict.fromkeys(queues))
    query = (
        select(_jobs.c.queue, func.count())
        .where(_jobs.c.state == "pending", backend_of(connection).is_one_of(_jobs.c.queue, wanted))
        .group_by(_jobs.c.queue)
    )
    counts = dict.fromkeys(wanted, 0)
    counts.update({str(queue): int(count) for queue, count in connection.execute(query)})
    return counts


def quarantined(connection: Connection, fingerprints: Iterable[str]) -> set[str]:
    wanted = list(dict.fromkeys(fingerprints))
    query = select(_quarantine.c.fingerprint).where(
        backend_of(connection).is_one_of(_quarantine.c.fingerprint, wanted)
    )
    return {str(value) for value in connection.execute(query).scalars()}


def enqueue_history_page(
    connection: Connection, schedule_id: str, limit: int, cursor: str | None
) -> Page[EnqueueHistoryRow]:
    """Newest first, the newest 100 attempts only; the history outlives its schedule.

    Older attempts stay in the table until the next compaction removes them
    (see projections.enqueue_history): the page stops at the 100th newest.
    """
    check_limit(limit, KEEP_PER_SCHEDULE)
    if not could_be_stored(schedule_id):
        return Page([], None)
    hundredth_newest = (
        select(_history.c.event_id)
        .where(_history.c.schedule_id == schedule_id)
        .order_by(_history.c.event_id.desc())
        .offset(KEEP_PER_SCHEDULE - 1)
        .limit(1)
        .scalar_subquery()
    )
    query = select(_history).where(
        _history.c.schedule_id == schedule_id,
        _history.c.event_id >= func.coalesce(hundredth_newest, 0),
    )
    if cursor is not None:
        before = decode_cursor(HISTORY_CURSOR, cursor, int)
        query = query.where(_history.c.event_id < before)
    query = query.order_by(_history.c.event_id.desc()).limit(limit + 1)
    items = [EnqueueHistoryRow(**row) for row in connection.execute(query).mappings()]
    more = len(items) > limit
    items = items[:limit]
    next_cursor = encode_cursor(HISTORY_CURSOR, items[-1].event_id) if more else None
    return Page(items, next_cursor)


class SqlReads(Reads):
    """The read queries, each on its own short read transaction."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def schedule(self, schedule_id: str) -> ScheduleRow | None:
        with translated_errors("reading a schedule"), self._engine.connect() as connection:
            return schedule(connection, schedule_id)

    def schedules_page(self, limit: int, cursor: str | None) -> Page[ScheduleRow]:
        with translated_errors("listing schedules"), self._engine.connect() as connection:
            return schedules_page(connection, limit, cursor)

    def due_schedules(self, now_ms: int, limit: int) -> list[ScheduleRow]:
        with translated_errors("reading due schedules"), self._engine.connect() as connection:
            return due_schedules(connection, now_ms, limit)

    def earliest_due_at(self) -> int | None:
        with translated_errors("reading due schedules"), self._engine.connect() as connection:
            return earliest_due_at(connection)

    def job(self, job_id: str) -> JobRow | None:
        with translated_errors("reading a job"), self._engine.connect() as connection:
            return job(connection, job_id)

    def enqueue_history(
        self, schedule_id: str, limit: int, cursor: str | None
    ) -> Page[EnqueueHistoryRow]:
        with translated_errors("reading enqueue history"), self._engine.connect() as connection:
            return enqueue_history_page(connection, schedule_id, limit, cursor)
