"""The SQL reads of schedules and their enqueue history: a schedule by id, the
pages the API and console list, the due schedules the scheduler fires.

Each is a function of a Connection so it can run inside a write transaction
(seeing its own appends) or on its own (`queries.SqlReads`).
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterable, Sequence
from dataclasses import fields
from typing import Any, Final

from sqlalchemy import (
    ColumnElement,
    Select,
    String,
    TextClause,
    bindparam,
    func,
    select,
    text,
)
from sqlalchemy.engine import Connection

from headgate._domain.admission import check_limit, could_be_stored
from headgate._domain.cursors import (
    HISTORY_CURSOR,
    MAX_PAGE,
    SCHEDULES_CURSOR,
    decode_cursor,
    encode_cursor,
)
from headgate._projections import (
    EnqueueEventRow,
    ScheduleRow,
)
from headgate._projections.enqueue_history import KEEP_PER_SCHEDULE
from headgate._store.port import (
    HealthFilter,
    Page,
)
from headgate._store.sql import runs
from headgate._store.sql.backends import code_point_order, dialect_of
from headgate._store.sql.predicates import (
    DECLARED_WHERE,
    DUE_INDEX_WHERE,
    LISTED_WHERE,
    LIVE_SPECS_WHERE,
    UNDECLARED_WHERE,
)
from headgate._store.sql.prepared import Prepared
from headgate._store.sql.projector import CHUNK
from headgate._store.sql.schema import LIVE

_schedules = LIVE.schedules
_history = LIVE.enqueue_history
_LIVE_AND_UNPAUSED: Final = text(DUE_INDEX_WHERE)
"""Written exactly as the due index's predicate: the databases use a partial
index only for a query whose condition matches it (SQLite textually), and
SQLAlchemy's own rendering of `paused IS false` does not."""
_LISTED: Final = text(LISTED_WHERE)
_listed_order = code_point_order(_schedules.c.schedule_id)
"""The listing index's key: a query must name this expression for it to serve."""
SURROGATES_START: Final = 0xD800
SURROGATES_END: Final = 0xDFFF
_SCHEDULE_ROW_COLUMNS: Final = tuple(_schedules.c[field.name] for field in fields(ScheduleRow))
_SCHEDULE_BY_ID: Final = Prepared(
    select(*_SCHEDULE_ROW_COLUMNS).where(
        _schedules.c.schedule_id == bindparam("schedule_id", type_=String)
    )
)
_SCHEDULE_FLAGS: Final = tuple(
    index
    for index, field in enumerate(fields(ScheduleRow))
    if field.name in {"paused", "deleted", "finished"}
)
"""Where a schedule row read on the driver holds a boolean (SQLite gives 0 or 1)."""


def _schedule_row(values: Sequence[Any]) -> ScheduleRow:
    row = list(values)
    for index in _SCHEDULE_FLAGS:
        row[index] = bool(row[index])
    return ScheduleRow(*row)


def schedule(connection: Connection, schedule_id: str) -> ScheduleRow | None:
    if not could_be_stored(schedule_id):
        return None
    rows = _SCHEDULE_BY_ID.run(connection, schedule_id=schedule_id)
    return _schedule_row(rows[0]) if rows else None


def schedules(connection: Connection, schedule_ids: Iterable[str]) -> dict[str, ScheduleRow]:
    """The rows of those schedules that exist (deleted ones included), by id: one
    indexed lookup per chunk of ids."""
    wanted = [key for key in dict.fromkeys(schedule_ids) if could_be_stored(key)]
    found: dict[str, ScheduleRow] = {}
    if len(wanted) == 1:  # a key's equality is an index probe: no planner switches needed
        row = schedule(connection, wanted[0])
        return {} if row is None else {row.schedule_id: row}
    dialect = dialect_of(connection)
    with dialect.probing_indexes(connection):
        for start in range(0, len(wanted), CHUNK):
            query = select(*_SCHEDULE_ROW_COLUMNS).where(
                dialect.is_one_of(_schedules.c.schedule_id, wanted[start : start + CHUNK])
            )
            found.update((row.schedule_id, ScheduleRow(*row)) for row in connection.execute(query))
    return found


def declared_schedules(connection: Connection, declared_by: str) -> list[ScheduleRow]:
    """The live schedules declared by code of this group (at a runtime's start),
    found on the declared index."""
    query = select(*_SCHEDULE_ROW_COLUMNS).where(
        _schedules.c.declared_by == declared_by,
        text(DECLARED_WHERE),
        _schedules.c.deleted.is_(False),
    )
    return [ScheduleRow(*row) for row in connection.execute(query)]


def schedules_page(
    connection: Connection,
    limit: int,
    cursor: str | None,
    search: str | None = None,
    *,
    maximum: int = MAX_PAGE,
    health: HealthFilter | None = None,
) -> Page[ScheduleRow]:
    """Live (not deleted) schedules ordered by id, code point by code point; with
    `search`, those whose id starts with it; with `health`, those in its state."""
    check_limit(limit, maximum)
    after = None if cursor is None else str(decode_cursor(SCHEDULES_CURSOR, cursor, str))
    query = schedules_query(limit + 1, after, search, health)
    if query is None:
        return Page([], None)
    items = [ScheduleRow(*row) for row in connection.execute(query)]
    more = len(items) > limit
    items = items[:limit]
    next_cursor = encode_cursor(SCHEDULES_CURSOR, items[-1].schedule_id) if more else None
    return Page(items, next_cursor)


def schedules_query(
    limit: int, after: str | None, search: str | None, health: HealthFilter | None = None
) -> Select[Any] | None:
    """A range of the listing index, in its order: ids after `after` (and starting
    with `search`, in `health`'s state), at most `limit`; None when `search`
    could match no id."""
    listed = _listed(search, health)
    if listed is None:
        return None
    query = select(*_SCHEDULE_ROW_COLUMNS).where(*listed)
    if after is not None:
        query = query.where(_listed_order > after)
    return query.order_by(_listed_order).limit(limit)


def schedule_count_query(
    search: str | None, health: HealthFilter | None = None
) -> Select[Any] | None:
    listed = _listed(search, health)
    if listed is None:
        return None
    return select(func.count()).select_from(_schedules).where(*listed)


def schedule_count(
    connection: Connection, search: str | None = None, health: HealthFilter | None = None
) -> int:
    query = schedule_count_query(search, health)
    return 0 if query is None else int(connection.execute(query).scalar_one())


_SPEC_COUNTS: Final = (
    select(_schedules.c.spec, func.count())
    .where(text(LIVE_SPECS_WHERE))
    .group_by(_schedules.c.spec)
    .order_by(_schedules.c.spec)
)
"""Every live schedule's spec, read from their index (not the rows): the whole
index, as the ceilings weigh every live schedule, so O(schedules) per write,
bounded by `max_schedules` itself."""


def spec_counts(connection: Connection, excluding: Collection[str] = ()) -> dict[str, int]:
    """Live schedules by spec (see `ScheduleReads.spec_counts`), less `excluding`."""
    with dialect_of(connection).probing_indexes(connection):
        counts = {str(spec): int(count) for spec, count in connection.execute(_SPEC_COUNTS)}
    for row in schedules(connection, excluding).values():
        if not row.deleted and not row.finished and counts.get(row.spec, 0) > 0:
            counts[row.spec] -= 1
    return {spec: count for spec, count in counts.items() if count}


def _listed(
    search: str | None, health: HealthFilter | None = None
) -> list[ColumnElement[bool] | TextClause] | None:
    """The conditions of the live schedules whose id starts with `search` (all of
    them for None or ""), as a range of the listing index, in `health`'s state;
    None when no id could start with it (it could not be stored)."""
    conditions: list[ColumnElement[bool] | TextClause] = [_LISTED]
    if health is not None:
        conditions.append(runs.health_condition(health))
    if not search:
        return conditions
    if not could_be_stored(search):
        return None
    conditions.append(_listed_order >= search)
    upper = _prefix_upper_bound(search)
    if upper is not None:
        conditions.append(_listed_order < upper)
    return conditions


def _prefix_upper_bound(prefix: str) -> str | None:
    """The least string above every string that starts with `prefix`, in code
    point order; None when there is none (the prefix is all U+10FFFF)."""
    trimmed = prefix.rstrip(chr(sys.maxunicode))
    if not trimmed:
        return None
    following = ord(trimmed[-1]) + 1
    if following == SURROGATES_START:  # no text holds a lone surrogate: skip them
        following = SURROGATES_END + 1
    return trimmed[:-1] + chr(following)


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


def due_count_query(now_ms: int) -> Select[Any]:
    """The due backlog: counted over the due index's range (as the due read's predicate)."""
    return (
        select(func.count())
        .select_from(_schedules)
        .where(_LIVE_AND_UNPAUSED, _schedules.c.due_at_ms <= now_ms)
    )


def due_count(connection: Connection, now_ms: int) -> int:
    return int(connection.execute(due_count_query(now_ms)).scalar_one())


def undeclared_count(connection: Connection) -> int:
    """Live schedules whose declaration disappeared from their code: a count over
    the undeclared index (empty unless something needs an operator)."""
    query = select(func.count()).select_from(_schedules).where(text(UNDECLARED_WHERE))
    return int(connection.execute(query).scalar_one())


def enqueue_history_page(
    connection: Connection, schedule_id: str, limit: int, cursor: str | None
) -> Page[EnqueueEventRow]:
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
    items = [EnqueueEventRow(**row) for row in connection.execute(query).mappings()]
    more = len(items) > limit
    items = items[:limit]
    next_cursor = encode_cursor(HISTORY_CURSOR, items[-1].event_id) if more else None
    return Page(items, next_cursor)
