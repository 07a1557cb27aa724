"""The SQL reads of jobs and their attempts: a job by id or tick, the pages the
API and console list, what a worker may claim next, and the counts the
metrics and the admission gate read.

Each is a function of a Connection so it can run inside a write transaction
(seeing its own appends) or on its own (`queries.SqlReads`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import fields, replace
from typing import Any, Final

from sqlalchemy import (
    BigInteger,
    ColumnElement,
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
    JOBS_CURSOR,
    MAX_PAGE,
    decode_timed_cursor,
    encode_timed_cursor,
)
from headgate._domain.decisions import LiveTickJob
from headgate._domain.events import UNFINISHED_STATES, JobState
from headgate._projections import (
    JobAttemptRow,
    JobRow,
)
from headgate._store.port import (
    JobFilter,
    Page,
)
from headgate._store.sql.backends import Dialect, dialect_of
from headgate._store.sql.claiming import takes_its_turn
from headgate._store.sql.predicates import (
    CLAIMABLE_WHERE,
    LIVE_TICKS_WHERE,
    LIVE_UNIQUE_KEY_WHERE,
    NOT_COMPLETED_WHERE,
    NOT_PENDING_WHERE,
    PENDING_WITH_DEADLINE_WHERE,
    RUNNING_WHERE,
)
from headgate._store.sql.prepared import PreparedPerDialect
from headgate._store.sql.projector import CHUNK
from headgate._store.sql.schema import LIVE

UNFINISHED: Final = tuple(sorted(state.value for state in UNFINISHED_STATES))
_jobs = LIVE.jobs
_paused = LIVE.paused_queues
_LIVE_UNIQUE_KEY: Final = text(LIVE_UNIQUE_KEY_WHERE)
_CLAIMABLE: Final = text(CLAIMABLE_WHERE)
_RUNNING: Final = text(RUNNING_WHERE)
_PENDING_WITH_DEADLINE: Final = text(PENDING_WITH_DEADLINE_WHERE)
_LIVE_TICKS: Final = text(LIVE_TICKS_WHERE)
_EARLIER: Final = "earlier"
_NOT_COMPLETED: Final = text(NOT_COMPLETED_WHERE)
_NOT_PENDING: Final = text(NOT_PENDING_WHERE)
_attempts = LIVE.job_attempts
_JOB_ROW_COLUMNS: Final = tuple(_jobs.c[field.name] for field in fields(JobRow))
"""Jobs are read in JobRow's field order and built from plain tuples, as
schedules are: workers read a job row for every claim."""


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


def pending_work(connection: Connection) -> dict[tuple[str, str], int]:
    query = (
        select(_jobs.c.queue, _jobs.c.kind, func.count())
        .where(_CLAIMABLE)
        .group_by(_jobs.c.queue, _jobs.c.kind)
    )
    return {(str(queue), str(kind)): int(count) for queue, kind, count in connection.execute(query)}


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
