"""Queries over the projections: what the scheduler, the API and the console read.

Each query is a function of a Connection so it can run inside a write
transaction (seeing that transaction's own appends) or on its own
(`SqlReads`, the port's read side).
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterable, Sequence
from dataclasses import fields, replace
from typing import Any, Final

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Engine,
    Select,
    String,
    TextClause,
    and_,
    bindparam,
    exists,
    func,
    or_,
    select,
    text,
    union_all,
)
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Executable

from headgate._domain.admission import check_limit, could_be_stored
from headgate._domain.cursors import (
    HISTORY_CURSOR,
    JOBS_CURSOR,
    MAX_PAGE,
    QUARANTINE_CURSOR,
    SCHEDULES_CURSOR,
    decode_cursor,
    decode_timed_cursor,
    encode_cursor,
    encode_timed_cursor,
)
from headgate._domain.decisions import LiveTickJob
from headgate._domain.events import UNFINISHED_STATES, JobState
from headgate._projections import (
    EnqueueHistoryRow,
    JobAttemptRow,
    JobRow,
    PausedQueueRow,
    QuarantineRow,
    ScheduleRow,
)
from headgate._projections.enqueue_history import KEEP_PER_SCHEDULE
from headgate._store.port import (
    STATE_COUNT_CAP,
    HealthFilter,
    JobFilter,
    LimitsState,
    Page,
    Reads,
    RunRead,
)
from headgate._store.sql import claiming, runs
from headgate._store.sql.backends import Dialect, code_point_order, dialect_of
from headgate._store.sql.claiming import takes_its_turn
from headgate._store.sql.engine import translated_errors
from headgate._store.sql.prepared import Prepared, PreparedPerDialect
from headgate._store.sql.projector import CHUNK
from headgate._store.sql.schema import (
    CLAIMABLE_WHERE,
    DECLARED_WHERE,
    DUE_INDEX_WHERE,
    LISTED_WHERE,
    LIVE,
    LIVE_SPECS_WHERE,
    LIVE_TICKS_WHERE,
    LIVE_UNIQUE_KEY_WHERE,
    NOT_COMPLETED_WHERE,
    NOT_PENDING_WHERE,
    PENDING_WITH_DEADLINE_WHERE,
    RUNNING_WHERE,
    UNDECLARED_WHERE,
)

UNFINISHED: Final = tuple(sorted(state.value for state in UNFINISHED_STATES))

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
_LISTED: Final = text(LISTED_WHERE)
_listed_order = code_point_order(_schedules.c.schedule_id)
"""The listing index's key: a query must name this expression for it to serve."""
SURROGATES_START: Final = 0xD800
SURROGATES_END: Final = 0xDFFF
_LIVE_UNIQUE_KEY: Final = text(LIVE_UNIQUE_KEY_WHERE)
_CLAIMABLE: Final = text(CLAIMABLE_WHERE)
_RUNNING: Final = text(RUNNING_WHERE)
_PENDING_WITH_DEADLINE: Final = text(PENDING_WITH_DEADLINE_WHERE)
_LIVE_TICKS: Final = text(LIVE_TICKS_WHERE)
_EARLIER: Final = "earlier"
_NOT_COMPLETED: Final = text(NOT_COMPLETED_WHERE)
_NOT_PENDING: Final = text(NOT_PENDING_WHERE)
_attempts, _blame, _paused = LIVE.job_attempts, LIVE.crash_blame, LIVE.paused_queues
_SCHEDULE_ROW_COLUMNS: Final = tuple(_schedules.c[field.name] for field in fields(ScheduleRow))
_JOB_ROW_COLUMNS: Final = tuple(_jobs.c[field.name] for field in fields(JobRow))
"""Jobs are read in JobRow's field order and built from plain tuples, as
schedules are: workers read a job row for every claim."""
_ANY_BLAME: Final = exists().select_from(_blame).label("any_blame")


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


def job(connection: Connection, job_id: str, *, for_update: bool = False) -> JobRow | None:
    """`for_update`: lock the row until the transaction ends (where writers run
    side by side, a decision read from it must not be overtaken by a claim)."""
    if not could_be_stored(job_id):
        return None
    query = _locked_if(
        connection, select(*_JOB_ROW_COLUMNS).where(_jobs.c.job_id == job_id), for_update
    )
    row = connection.execute(query).first()
    return None if row is None else JobRow(*row)


def _locked_if(connection: Connection, query: Select[Any], for_update: bool) -> Select[Any]:
    return dialect_of(connection).locked(query) if for_update else query


def job_for_tick(
    connection: Connection, schedule_id: str, tick_ms: int, *, for_update: bool = False
) -> JobRow | None:
    """The job whose periodic origin is (schedule, tick): one probe of its unique index."""
    if not could_be_stored(schedule_id):
        return None
    query = select(*_JOB_ROW_COLUMNS).where(
        _jobs.c.periodic_schedule_id == schedule_id, _jobs.c.periodic_tick_ms == tick_ms
    )
    query = _locked_if(connection, query, for_update)
    row = connection.execute(query).first()
    return None if row is None else JobRow(*row)


def jobs(
    connection: Connection, job_ids: Iterable[str], *, for_update: bool = False
) -> dict[str, JobRow]:
    """The rows of those jobs that exist, by id (one indexed lookup per chunk)."""
    wanted = [job_id for job_id in dict.fromkeys(job_ids) if could_be_stored(job_id)]
    found: dict[str, JobRow] = {}
    dialect = dialect_of(connection)
    for start in range(0, len(wanted), CHUNK):
        query = select(*_JOB_ROW_COLUMNS).where(
            dialect.is_one_of(_jobs.c.job_id, wanted[start : start + CHUNK])
        )
        query = _locked_if(connection, query.order_by(_jobs.c.job_id), for_update)
        found.update((row.job_id, JobRow(*row)) for row in connection.execute(query))
    return found


def running_on(connection: Connection, worker_ids: Collection[str]) -> list[JobRow]:
    if not worker_ids:
        return []
    query = select(*_JOB_ROW_COLUMNS).where(
        _RUNNING, dialect_of(connection).is_one_of(_jobs.c.worker_id, list(worker_ids))
    )
    return [JobRow(*row) for row in connection.execute(query)]


def late_jobs(
    connection: Connection,
    queues: Collection[str],
    kinds: Collection[str],
    now_ms: int,
    limit: int,
) -> list[JobRow]:
    if not queues or not kinds:
        return []
    query = late_jobs_query(dialect_of(connection), queues, kinds, now_ms, limit)
    return [JobRow(*row) for row in connection.execute(query)]


def late_jobs_query(
    dialect: Dialect, queues: Collection[str], kinds: Collection[str], now_ms: int, limit: int
) -> Select[Any]:
    """On the index of pending jobs with a deadline, by deadline: the late ones
    are its first entries. The queue is compared as an expression, which no
    index serves: SQLite would otherwise read every pending job of the queues
    (the queue and state index) to sort the few late ones."""
    return (
        select(*_JOB_ROW_COLUMNS)
        .where(
            _PENDING_WITH_DEADLINE,
            _jobs.c.start_by_ms < now_ms,
            dialect.is_one_of(_jobs.c.queue.concat(""), sorted(queues)),
            dialect.is_one_of(_jobs.c.kind, sorted(kinds)),
        )
        .order_by(_jobs.c.start_by_ms, _jobs.c.job_id)
        .limit(limit)
    )


def pending_like(connection: Connection, kind: str, payload: str, limit: int) -> list[JobRow]:
    query = (
        select(*_JOB_ROW_COLUMNS)
        .where(_CLAIMABLE, _jobs.c.kind == kind, _jobs.c.payload == payload)
        .order_by(_jobs.c.run_at_ms, _jobs.c.job_id)
        .limit(limit)
    )
    return [JobRow(*row) for row in connection.execute(query)]


def crash_blame(connection: Connection, fingerprints: Collection[str]) -> dict[str, int]:
    wanted = list(dict.fromkeys(fingerprints))
    if not wanted:
        return {}
    query = select(_blame.c.fingerprint, _blame.c.blame_milli).where(
        dialect_of(connection).is_one_of(_blame.c.fingerprint, wanted)
    )
    blamed = dict.fromkeys(wanted, 0)
    blamed.update({str(f): int(b) for f, b in connection.execute(query)})
    return blamed


def jobs_page(
    connection: Connection,
    where: JobFilter,
    limit: int,
    cursor: str | None,
    maximum: int = MAX_PAGE,
) -> Page[JobRow]:
    """Newest first, by (created_at_ms, job_id); the cursor is where the last page stopped."""
    check_limit(limit, maximum)
    query = jobs_query(where, limit, cursor, _JOB_ROW_COLUMNS)
    if query is None:
        return Page([], None)
    with dialect_of(connection).probing_indexes(connection):
        items = [JobRow(*row) for row in connection.execute(query)]
    more = len(items) > limit
    items = items[:limit]
    last = items[-1] if more else None
    next_cursor = (
        None if last is None else encode_timed_cursor(JOBS_CURSOR, last.created_at_ms, last.job_id)
    )
    return Page(items, next_cursor)


def jobs_query(
    where: JobFilter, limit: int, cursor: str | None, columns: Sequence[Any] = (_jobs,)
) -> Select[Any] | None:
    """One more than a page of `jobs_page` (of `columns`, which hold the order's
    two), or None when a filter names what no job could hold. A filter by state
    (but completed), schedule, manual run, kind or search walks its own index in
    this order (a kind's, one branch a state); by queue alone, the creation
    index, newest first."""
    conditions = _job_conditions(where)
    alternatives = _job_alternatives(where)
    if conditions is None or alternatives is None:
        return None
    if cursor is not None:
        created, job_id = decode_timed_cursor(JOBS_CURSOR, cursor)
        conditions.append(
            or_(
                _jobs.c.created_at_ms < created,
                and_(_jobs.c.created_at_ms == created, _jobs.c.job_id < job_id),
            )
        )
    newest_first = (_jobs.c.created_at_ms.desc(), _jobs.c.job_id.desc())
    query = select(*columns).where(*conditions)
    if not alternatives:
        return query.order_by(*newest_first).limit(limit + 1)
    # Each alternative (a schedule's ticks or its manual runs; a job id or a
    # unique key) walked on its own index in this order (an OR of them would
    # scan one of them), then merged.
    branches = [
        query.where(*chosen).order_by(*newest_first).limit(limit + 1).subquery()
        for chosen in alternatives
    ]
    merged = union_all(*(select(branch) for branch in branches)).subquery()
    return (
        select(merged)
        .order_by(merged.c.created_at_ms.desc(), merged.c.job_id.desc())
        .limit(limit + 1)
    )


_Condition = ColumnElement[bool] | TextClause


def _job_conditions(where: JobFilter) -> list[_Condition] | None:
    """The filter's plain equalities, or None when one names what no job could hold."""
    conditions: list[_Condition] = []
    for column, wanted in (
        (_jobs.c.state, where.state),
        (_jobs.c.queue, where.queue),
        (_jobs.c.kind, where.kind),
        (_jobs.c.periodic_schedule_id, where.schedule_id),
        (_jobs.c.run_now_schedule_id, where.run_now_schedule_id),
    ):
        if wanted is not None:
            if not could_be_stored(wanted):
                return None
            conditions.append(column == wanted)
    if where.state is not None and where.state != JobState.COMPLETED:
        conditions.append(_NOT_COMPLETED)
    if where.kind is not None and where.state not in {None, JobState.PENDING}:
        conditions.append(_NOT_PENDING)
    return conditions


def _job_alternatives(where: JobFilter) -> list[list[_Condition]] | None:
    """The filter's either-or parts (made by a schedule, a search) as the
    combinations a row may match, [] for none, None when nothing could match."""
    made_by: list[list[_Condition]] = [[]]
    if where.made_by_schedule is not None:
        if not could_be_stored(where.made_by_schedule):
            return None
        made_by = [
            [_jobs.c.periodic_schedule_id == where.made_by_schedule],
            [_jobs.c.run_now_schedule_id == where.made_by_schedule],
        ]
    searched: list[list[_Condition]] = [[]]
    if where.search is not None:
        ids = [value for value in (where.search, *where.search_ids) if could_be_stored(value)]
        searched = [[_jobs.c.unique_key == where.search]] if ids else []
        if ids:
            searched.append([_jobs.c.job_id.in_(ids)])
        if not searched:
            return None
    by_state: list[list[_Condition]] = [[]]
    if where.kind is not None and where.state is None and made_by == [[]] and searched == [[]]:
        by_state = [_one_state(state) for state in JobState]
    combined = [
        first + second + third for first in made_by for second in searched for third in by_state
    ]
    return [] if combined == [[]] else combined


def _one_state(state: JobState) -> list[_Condition]:
    """A kind's jobs of one state, as the kind's index holds them (its pending
    ones on the state index)."""
    if state == JobState.PENDING:
        return [_jobs.c.state == state.value, _NOT_COMPLETED]
    if state == JobState.COMPLETED:
        return [_jobs.c.state == state.value, _NOT_PENDING]
    return [_jobs.c.state == state.value, _NOT_COMPLETED, _NOT_PENDING]


def state_counts(connection: Connection, where: JobFilter, cap: int) -> dict[str, int]:
    """Per state, a count bounded by `cap` (one query each)."""
    counts = dict.fromkeys((state.value for state in JobState), 0)
    for state in counts:
        query = state_count_query(where, state, cap)
        if query is not None:
            with dialect_of(connection).probing_indexes(connection):
                counts[state] = int(connection.execute(query).scalar_one())
    return counts


def state_count_query(where: JobFilter, state: str, cap: int) -> Select[Any] | None:
    """How many jobs of `state` match, up to `cap`: the listing of that state's
    first `cap` rows, counted, so it reads at most `cap` entries of its index."""
    order = (_jobs.c.created_at_ms, _jobs.c.job_id)  # on every listing index: no row read
    listing = jobs_query(replace(where, state=state), cap - 1, None, order)
    if listing is None:
        return None
    return select(func.count()).select_from(listing.order_by(None).subquery())


def latest_attempts(connection: Connection, job_ids: Collection[str]) -> dict[str, JobAttemptRow]:
    """Each job's newest attempt: per chunk, the newest event id of each job on the
    (job_id, event_id) index, then those rows by key."""
    wanted = [job_id for job_id in dict.fromkeys(job_ids) if could_be_stored(job_id)]
    found: dict[str, JobAttemptRow] = {}
    dialect = dialect_of(connection)
    for start in range(0, len(wanted), CHUNK):
        newest = (
            select(func.max(_attempts.c.event_id))
            .where(dialect.is_one_of(_attempts.c.job_id, wanted[start : start + CHUNK]))
            .group_by(_attempts.c.job_id)
        )
        query = select(_attempts).where(_attempts.c.event_id.in_(newest))
        with dialect.probing_indexes(connection):
            rows = connection.execute(query).mappings().all()
        found.update((row["job_id"], JobAttemptRow(**row)) for row in rows)
    return found


def job_attempts(connection: Connection, job_id: str, limit: int) -> list[JobAttemptRow]:
    if not could_be_stored(job_id):
        return []
    query = (
        select(_attempts)
        .where(_attempts.c.job_id == job_id)
        .order_by(_attempts.c.event_id.desc())
        .limit(limit)
    )
    return [JobAttemptRow(**row) for row in connection.execute(query).mappings()]


def earliest_claimable(
    connection: Connection, queues: Collection[str], kinds: Collection[str]
) -> int | None:
    """Per queue, the claim index's first entry of these kinds; the earliest of them."""
    if not queues or not kinds:
        return None
    dialect = dialect_of(connection)
    earliest: int | None = None
    for queue in queues:
        query = (
            select(_jobs.c.run_at_ms)
            .where(
                _CLAIMABLE,
                _jobs.c.queue == queue,
                dialect.is_one_of(_jobs.c.kind, list(kinds)),
                ~exists().where(_paused.c.queue == queue),
                takes_its_turn(),
            )
            .order_by(_jobs.c.run_at_ms, _jobs.c.job_id)
            .limit(1)
        )
        found = connection.execute(query).scalar()
        if found is not None and (earliest is None or found < earliest):
            earliest = int(found)
    return earliest


def _first_run_after(dialect: Dialect) -> Executable:
    queue = bindparam("queue", type_=String)
    return (
        select(_jobs.c.run_at_ms)
        .where(
            _CLAIMABLE,
            _jobs.c.queue == queue,
            _jobs.c.run_at_ms > bindparam("after", type_=BigInteger),
            dialect.is_one_of_bound("kinds", _jobs.c.kind),
            ~exists().where(_paused.c.queue == queue),
            takes_its_turn(),
        )
        .order_by(_jobs.c.run_at_ms, _jobs.c.job_id)
        .limit(1)
    )


_FIRST_RUN_AFTER: Final = PreparedPerDialect(_first_run_after)
"""earliest_claimable after an instant, per queue: asked after every claim that
left a worker slots free, so built and compiled once."""


def next_run_after(
    connection: Connection, queues: Collection[str], kinds: Collection[str], after_ms: int
) -> int | None:
    """The earliest run_at_ms after `after_ms` of a claimable job of these kinds on
    these queues (as earliest_claimable reads it)."""
    if not queues or not kinds:
        return None
    dialect = dialect_of(connection)
    statement = _FIRST_RUN_AFTER.on(dialect)
    wanted = dialect.batch_value(sorted(kinds))
    found = [
        int(rows[0][0])
        for queue in queues
        if (rows := statement.run(connection, queue=queue, after=after_ms, kinds=wanted))
    ]
    return min(found, default=None)


def paused_queues(connection: Connection) -> dict[str, PausedQueueRow]:
    query = select(_paused.c.queue, _paused.c.note, _paused.c.paused_at_ms).order_by(
        _paused.c.queue
    )
    return {row.queue: PausedQueueRow(*row) for row in connection.execute(query)}


def quarantine_page(
    connection: Connection, limit: int, cursor: str | None, maximum: int = MAX_PAGE
) -> Page[QuarantineRow]:
    """Newest first, by (quarantined_at_ms, fingerprint). Unindexed on purpose: the
    table holds what operators and the crash limit put there, not one row per job."""
    check_limit(limit, maximum)
    query = select(_quarantine)
    if cursor is not None:
        at_ms, fingerprint = decode_timed_cursor(QUARANTINE_CURSOR, cursor)
        query = query.where(
            or_(
                _quarantine.c.quarantined_at_ms < at_ms,
                and_(
                    _quarantine.c.quarantined_at_ms == at_ms,
                    _quarantine.c.fingerprint < fingerprint,
                ),
            )
        )
    query = query.order_by(
        _quarantine.c.quarantined_at_ms.desc(), _quarantine.c.fingerprint.desc()
    ).limit(limit + 1)
    items = [QuarantineRow(**row) for row in connection.execute(query).mappings()]
    more = len(items) > limit
    items = items[:limit]
    last = items[-1] if more else None
    next_cursor = (
        None
        if last is None
        else encode_timed_cursor(QUARANTINE_CURSOR, last.quarantined_at_ms, last.fingerprint)
    )
    return Page(items, next_cursor)


def quarantine_entry(connection: Connection, fingerprint: str) -> QuarantineRow | None:
    if not could_be_stored(fingerprint):
        return None
    query = select(_quarantine).where(_quarantine.c.fingerprint == fingerprint)
    row = connection.execute(query).mappings().first()
    return None if row is None else QuarantineRow(**row)


def pending_work(connection: Connection) -> dict[tuple[str, str], int]:
    query = (
        select(_jobs.c.queue, _jobs.c.kind, func.count())
        .where(_CLAIMABLE)
        .group_by(_jobs.c.queue, _jobs.c.kind)
    )
    return {(str(queue), str(kind)): int(count) for queue, kind, count in connection.execute(query)}


def due_count_query(now_ms: int) -> Select[Any]:
    """The due backlog: counted over the due index's range (as the due read's predicate)."""
    return (
        select(func.count())
        .select_from(_schedules)
        .where(_LIVE_AND_UNPAUSED, _schedules.c.due_at_ms <= now_ms)
    )


def due_count(connection: Connection, now_ms: int) -> int:
    return int(connection.execute(due_count_query(now_ms)).scalar_one())


def job_counts_query() -> Select[Any]:
    """Jobs by (queue, state): the (queue, state) index alone answers it, in its order."""
    return (
        select(_jobs.c.queue, _jobs.c.state, func.count())
        .group_by(_jobs.c.queue, _jobs.c.state)
        .order_by(_jobs.c.queue, _jobs.c.state)
    )


def job_counts(connection: Connection) -> dict[tuple[str, str], int]:
    return {
        (str(queue), str(state)): int(count)
        for queue, state, count in connection.execute(job_counts_query())
    }


def oldest_pending_query() -> Select[Any]:
    """Per queue, the earliest run_at of its pending jobs, from the claim index
    (queue, run_at_ms, job_id), in its order."""
    return (
        select(_jobs.c.queue, func.min(_jobs.c.run_at_ms))
        .where(_CLAIMABLE)
        .group_by(_jobs.c.queue)
        .order_by(_jobs.c.queue)
    )


def oldest_pending(connection: Connection) -> dict[str, int]:
    return {str(queue): int(run_at) for queue, run_at in connection.execute(oldest_pending_query())}


def undeclared_count(connection: Connection) -> int:
    """Live schedules whose declaration disappeared from their code: a count over
    the undeclared index (empty unless something needs an operator)."""
    query = select(func.count()).select_from(_schedules).where(text(UNDECLARED_WHERE))
    return int(connection.execute(query).scalar_one())


def quarantined_count(connection: Connection) -> int:
    query = select(func.count()).select_from(_quarantine)
    return int(connection.execute(query).scalar_one())


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
    wanted = dialect_of(connection).each_of(keys, _jobs.c.unique_key)
    holder = select(_jobs.c.job_id).where(_LIVE_UNIQUE_KEY, _jobs.c.unique_key == wanted.c.value)
    return select(wanted.c.value, holder.scalar_subquery())


def live_ticks(connection: Connection, schedule_ids: Iterable[str]) -> dict[str, list[LiveTickJob]]:
    """schedule id -> its pending and running tick jobs, oldest tick first (on the
    live-ticks index, which holds only those)."""
    wanted = [key for key in dict.fromkeys(schedule_ids) if could_be_stored(key)]
    found: dict[str, list[LiveTickJob]] = {key: [] for key in wanted}
    dialect = dialect_of(connection)
    for start in range(0, len(wanted), CHUNK):
        query = (
            select(
                _jobs.c.periodic_schedule_id,
                _jobs.c.job_id,
                _jobs.c.periodic_tick_ms,
                _jobs.c.state,
                _jobs.c.version,
            )
            .where(
                _LIVE_TICKS,
                dialect.is_one_of(_jobs.c.periodic_schedule_id, wanted[start : start + CHUNK]),
            )
            .order_by(_jobs.c.periodic_schedule_id, _jobs.c.periodic_tick_ms)
        )
        for schedule_id, job_id, tick_ms, state, version in connection.execute(query):
            found[str(schedule_id)].append(
                LiveTickJob(str(job_id), int(tick_ms), str(state), int(version))
            )
    return found


def pending_counts(connection: Connection, queues: Iterable[str]) -> dict[str, int]:
    wanted = list(dict.fromkeys(queues))
    query = (
        select(_jobs.c.queue, func.count())
        .where(
            _jobs.c.state.in_(UNFINISHED),
            dialect_of(connection).is_one_of(_jobs.c.queue, wanted),
        )
        .group_by(_jobs.c.queue)
    )
    counts = dict.fromkeys(wanted, 0)
    counts.update({str(queue): int(count) for queue, count in connection.execute(query)})
    return counts


def _quarantined_statement(dialect: Dialect) -> Select[Any]:
    wanted = dialect.each_of_bound("fingerprints", _quarantine.c.fingerprint)
    return select(_quarantine.c.fingerprint).where(
        _quarantine.c.fingerprint.in_(select(wanted.c.value))
    )


_QUARANTINED: Final = PreparedPerDialect(_quarantined_statement)


def quarantined(connection: Connection, fingerprints: Iterable[str]) -> set[str]:
    dialect = dialect_of(connection)
    wanted = dialect.batch_value(list(dict.fromkeys(fingerprints)))
    statement = _QUARANTINED.on(dialect)
    return {str(value) for (value,) in statement.run(connection, fingerprints=wanted)}


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

    def schedules_page(
        self,
        limit: int,
        cursor: str | None,
        search: str | None = None,
        health: HealthFilter | None = None,
    ) -> Page[ScheduleRow]:
        with translated_errors("listing schedules"), self._engine.connect() as connection:
            return schedules_page(connection, limit, cursor, search, health=health)

    def schedule_count(self, search: str | None = None, health: HealthFilter | None = None) -> int:
        with translated_errors("counting schedules"), self._engine.connect() as connection:
            return schedule_count(connection, search, health)

    def schedule_runs(self, schedule_id: str, limit: int, cursor: str | None) -> Page[RunRead]:
        with translated_errors("reading a schedule's runs"), self._engine.connect() as connection:
            return runs.schedule_runs_page(connection, schedule_id, limit, cursor)

    def recent_runs(
        self, schedule_ids: Collection[str], per_schedule: int
    ) -> dict[str, list[RunRead]]:
        with translated_errors("reading schedules' runs"), self._engine.connect() as connection:
            return runs.recent_runs(connection, schedule_ids, per_schedule)

    def spec_counts(self, excluding: Collection[str] = ()) -> dict[str, int]:
        with translated_errors("counting schedules by spec"), self._engine.connect() as connection:
            return spec_counts(connection, excluding)

    def due_schedules(self, now_ms: int, limit: int) -> list[ScheduleRow]:
        with translated_errors("reading due schedules"), self._engine.connect() as connection:
            return due_schedules(connection, now_ms, limit)

    def earliest_due_at(self) -> int | None:
        with translated_errors("reading due schedules"), self._engine.connect() as connection:
            return earliest_due_at(connection)

    def job(self, job_id: str) -> JobRow | None:
        with translated_errors("reading a job"), self._engine.connect() as connection:
            return job(connection, job_id)

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobRow]:
        with translated_errors("reading jobs"), self._engine.connect() as connection:
            return jobs(connection, job_ids)

    def jobs_page(self, where: JobFilter, limit: int, cursor: str | None) -> Page[JobRow]:
        with translated_errors("listing jobs"), self._engine.connect() as connection:
            return jobs_page(connection, where, limit, cursor)

    def job_attempts(self, job_id: str, limit: int) -> list[JobAttemptRow]:
        with translated_errors("reading a job's attempts"), self._engine.connect() as connection:
            return job_attempts(connection, job_id, limit)

    def state_counts(self, where: JobFilter, cap: int) -> dict[str, int]:
        check_limit(cap, STATE_COUNT_CAP)
        with translated_errors("counting jobs"), self._engine.connect() as connection:
            return state_counts(connection, where, cap)

    def latest_attempts(self, job_ids: Collection[str]) -> dict[str, JobAttemptRow]:
        with translated_errors("reading jobs' attempts"), self._engine.connect() as connection:
            return latest_attempts(connection, job_ids)

    def quarantine_page(self, limit: int, cursor: str | None) -> Page[QuarantineRow]:
        with translated_errors("listing quarantine"), self._engine.connect() as connection:
            return quarantine_page(connection, limit, cursor)

    def quarantine_entry(self, fingerprint: str) -> QuarantineRow | None:
        with translated_errors("reading quarantine"), self._engine.connect() as connection:
            return quarantine_entry(connection, fingerprint)

    def pending_work(self) -> dict[tuple[str, str], int]:
        with translated_errors("counting pending jobs"), self._engine.connect() as connection:
            return pending_work(connection)

    def earliest_claimable(self, queues: Collection[str], kinds: Collection[str]) -> int | None:
        with translated_errors("reading pending jobs"), self._engine.connect() as connection:
            return earliest_claimable(connection, queues, kinds)

    def next_claimable_at(
        self, queues: Collection[str], kinds: Collection[str], now_ms: int
    ) -> int | None:
        with translated_errors("reading pending jobs"), self._engine.connect() as connection:
            scheduled = next_run_after(connection, queues, kinds, now_ms)
            frees = claiming.rate_slot_frees_at(connection, now_ms)
        return min((at for at in (scheduled, frees) if at is not None), default=None)

    def paused_queues(self) -> dict[str, PausedQueueRow]:
        with translated_errors("reading paused queues"), self._engine.connect() as connection:
            return paused_queues(connection)

    def limits_state(self, now_ms: int) -> LimitsState:
        with translated_errors("reading limits"), self._engine.connect() as connection:
            return LimitsState(
                claiming.concurrency_limits(connection),
                claiming.rate_limits(connection),
                claiming.running_counts(connection),
                claiming.recent_starts(connection, now_ms),
            )

    def due_count(self, now_ms: int) -> int:
        with translated_errors("counting due schedules"), self._engine.connect() as connection:
            return due_count(connection, now_ms)

    def job_counts(self) -> dict[tuple[str, str], int]:
        with translated_errors("counting jobs"), self._engine.connect() as connection:
            return job_counts(connection)

    def oldest_pending(self) -> dict[str, int]:
        with translated_errors("reading pending jobs"), self._engine.connect() as connection:
            return oldest_pending(connection)

    def quarantined_count(self) -> int:
        with translated_errors("counting quarantines"), self._engine.connect() as connection:
            return quarantined_count(connection)

    def undeclared_count(self) -> int:
        with translated_errors("counting undeclared schedules"), self._engine.connect() as c:
            return undeclared_count(c)

    def enqueue_history(
        self, schedule_id: str, limit: int, cursor: str | None
    ) -> Page[EnqueueHistoryRow]:
        with translated_errors("reading enqueue history"), self._engine.connect() as connection:
            return enqueue_history_page(connection, schedule_id, limit, cursor)
