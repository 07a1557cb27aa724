"""Reads of the schedules' runs and of their health (`ScheduleReads`), on the
runs' index (`ix_headgate_schedule_runs_schedule`: schedule, position)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import fields
from typing import Any, Final

from sqlalchemy import (
    ColumnElement,
    Integer,
    String,
    and_,
    bindparam,
    false,
    func,
    literal,
    literal_column,
    not_,
    select,
)
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Executable

from headgate._domain.admission import check_limit, could_be_stored
from headgate._domain.cursors import RUNS_CURSOR, decode_cursor, encode_cursor
from headgate._domain.events import JobState
from headgate._domain.schedule_health import FAILED_OUTCOMES, HealthState
from headgate._projections import ScheduleRunRow
from headgate._projections.schedule_runs import KEEP_PER_SCHEDULE, SETTLED_STATES, RunState
from headgate._store.port import HealthFilter, Page, RunRead
from headgate._store.sql.backends import Dialect, dialect_of
from headgate._store.sql.prepared import Prepared, PreparedPerDialect
from headgate._store.sql.projector import CHUNK
from headgate._store.sql.schema import LIVE

_runs, _jobs, _schedules = LIVE.schedule_runs, LIVE.jobs, LIVE.schedules
_RUN_COLUMNS: Final = tuple(_runs.c[field.name] for field in fields(ScheduleRunRow))
_WAITING: Final = and_(_runs.c.state == literal_column("'enqueued'"), _runs.c.tick_ms.is_not(None))
"""`WAITING_RUNS_WHERE`, the waiting runs' index's condition, qualified (the late
read joins the jobs, which have a state too) and with its value written out (a
bound one would keep SQLite off a partial index)."""
_COUNTED: Final = sorted(SETTLED_STATES - {RunState.CANCELLED})
"""Settled runs that say whether a schedule fails: a cancel says neither."""
_MANUAL: Final = next(
    index for index, field in enumerate(fields(ScheduleRunRow)) if field.name == "manual"
)
"""Where a run row read on the driver holds its boolean (SQLite gives 0 or 1)."""
_PER_SCHEDULE: Final = bindparam("per_schedule", type_=Integer)
_ONE_SCHEDULES_RUNS: Final = Prepared(
    select(*_RUN_COLUMNS)
    .where(_runs.c.schedule_id == bindparam("schedule_id", type_=String))
    .order_by(_runs.c.position.desc())
    .limit(_PER_SCHEDULE)
)
"""A schedule's newest runs, walking its runs' index backwards (a schedule's
page and its health: the API's read of one schedule)."""


def _ranked_runs(dialect: Dialect) -> Executable:
    """The newest `per_schedule` runs of each schedule of the batch `schedules`,
    ranked per schedule in one statement (a page of the schedules list)."""
    rank = (
        func.row_number()
        .over(partition_by=_runs.c.schedule_id, order_by=_runs.c.position.desc())
        .label("rank")
    )
    ranked = (
        select(*_RUN_COLUMNS, rank)
        .where(dialect.is_one_of_bound("schedules", _runs.c.schedule_id))
        .subquery()
    )
    return (
        select(*(ranked.c[field.name] for field in fields(ScheduleRunRow)))
        .where(ranked.c.rank <= _PER_SCHEDULE)
        .order_by(ranked.c.schedule_id, ranked.c.position.desc())
    )


_RANKED_RUNS: Final = PreparedPerDialect(_ranked_runs)
_JOB_STATES: Final = PreparedPerDialect(
    lambda dialect: select(_jobs.c.job_id, _jobs.c.state).where(
        dialect.is_one_of_bound("jobs", _jobs.c.job_id)
    )
)


def _run_row(values: Any) -> ScheduleRunRow:
    row = list(values)
    row[_MANUAL] = bool(row[_MANUAL])
    return ScheduleRunRow(*row)


def _read(row: Any) -> RunRead:
    *run, job_state = row
    return RunRead(ScheduleRunRow(*run), job_state)


def _with_job_state(query_columns: tuple[Any, ...] = _RUN_COLUMNS) -> Any:
    return select(*query_columns, _jobs.c.state).outerjoin(_jobs, _jobs.c.job_id == _runs.c.job_id)


def _oldest_shown(schedule_id: Any) -> Any:
    """The position of the schedule's 100th newest run (None: it has fewer)."""
    newer = _runs.alias("newer")
    return (
        select(newer.c.position)
        .where(newer.c.schedule_id == schedule_id)
        .order_by(newer.c.position.desc())
        .offset(KEEP_PER_SCHEDULE - 1)
        .limit(1)
        .scalar_subquery()
    )


def schedule_runs_page(
    connection: Connection, schedule_id: str, limit: int, cursor: str | None
) -> Page[RunRead]:
    """Newest first, the newest 100 only (older rows wait for compaction)."""
    check_limit(limit, KEEP_PER_SCHEDULE)
    if not could_be_stored(schedule_id):
        return Page([], None)
    before = None if cursor is None else int(decode_cursor(RUNS_CURSOR, cursor, int))
    query = runs_page_query(schedule_id, limit + 1, before)
    items = [_read(row) for row in connection.execute(query)]
    more = len(items) > limit
    items = items[:limit]
    next_cursor = encode_cursor(RUNS_CURSOR, items[-1].run.position) if more else None
    return Page(items, next_cursor)


def runs_page_query(schedule_id: str, limit: int, before: int | None) -> Any:
    """The schedule's newest runs (of its newest 100) before position `before`,
    newest first, walking the runs' index backwards."""
    query = _with_job_state().where(
        _runs.c.schedule_id == schedule_id,
        _runs.c.position >= func.coalesce(_oldest_shown(schedule_id), 0),
    )
    if before is not None:
        query = query.where(_runs.c.position < before)
    return query.order_by(_runs.c.position.desc()).limit(limit)


def recent_runs(
    connection: Connection, schedule_ids: Collection[str], per_schedule: int
) -> dict[str, list[RunRead]]:
    """Each schedule's newest runs (one schedule's on its index, several ranked
    per schedule in one statement); then the jobs of those not settled (a few),
    for whether each waits or runs. Prepared statements: a schedule's page
    and the schedules list read them on every request."""
    check_limit(per_schedule, KEEP_PER_SCHEDULE)
    wanted = sorted({i for i in schedule_ids if could_be_stored(i)})
    found: dict[str, list[ScheduleRunRow]] = {}
    if not wanted:
        return {}
    dialect = dialect_of(connection)
    if len(wanted) == 1:
        rows = _ONE_SCHEDULES_RUNS.run(connection, schedule_id=wanted[0], per_schedule=per_schedule)
    else:
        rows = _RANKED_RUNS.on(dialect).run(
            connection, schedules=dialect.batch_value(wanted), per_schedule=per_schedule
        )
    for row in rows:
        run = _run_row(row)
        found.setdefault(run.schedule_id, []).append(run)
    open_runs = [
        run.job_id for runs in found.values() for run in runs if run.state not in SETTLED_STATES
    ]
    states = _job_states(connection, dialect, open_runs)
    return {
        schedule_id: [RunRead(run, states.get(run.job_id)) for run in runs]
        for schedule_id, runs in found.items()
    }


def _job_states(connection: Connection, dialect: Dialect, job_ids: list[str]) -> dict[str, str]:
    states: dict[str, str] = {}
    if not job_ids:
        return states
    statement = _JOB_STATES.on(dialect)
    with dialect.probing_indexes(connection):  # the jobs grow faster than their statistics
        for start in range(0, len(job_ids), CHUNK):
            chunk = dialect.batch_value(job_ids[start : start + CHUNK])
            rows = statement.run(connection, jobs=chunk)
            states.update({str(job_id): str(state) for job_id, state in rows})
    return states


def health_condition(health: HealthFilter) -> ColumnElement[bool]:
    """The schedules (rows of `schedules`) in `health.state`, as
    `schedule_health.health_of` judges them: the first of paused, missing,
    failing, late that holds, else ok. Each state is its own condition, so a
    filter evaluates only the lookups its state needs."""
    schedules = _schedules.c
    cut = health.now_ms - health.grace_ms
    paused = schedules.paused
    missing = and_(not_(schedules.finished), schedules.due_at_ms < cut)
    newest_counted = (
        select(_runs.c.state)
        .where(_runs.c.schedule_id == schedules.schedule_id, _runs.c.state.in_(_COUNTED))
        .order_by(_runs.c.position.desc())
        .limit(1)
        .scalar_subquery()
    )
    failing = func.coalesce(newest_counted.in_(sorted(FAILED_OUTCOMES)), false())
    late = (
        select(literal(1))
        .select_from(_runs.join(_jobs, _jobs.c.job_id == _runs.c.job_id))
        .where(
            _runs.c.schedule_id == schedules.schedule_id,
            _WAITING,
            _runs.c.tick_ms < cut,
            _jobs.c.state == JobState.PENDING.value,
        )
        .exists()
    )
    before = [paused, missing, failing, late]
    order = [HealthState.PAUSED, HealthState.MISSING, HealthState.FAILING, HealthState.LATE]
    if health.state is HealthState.OK:
        return and_(*(not_(condition) for condition in before))
    index = order.index(health.state)
    return and_(*(not_(condition) for condition in before[:index]), before[index])
