"""Compaction on SQL: the domain's retention rules (`headgate._domain.retention`)
as statements.

Trimmed streams keep the newest events of each type the rules keep (found by
a window over their events); finished jobs past retention go with their
streams and rows; expired manual-run keys go. Because compaction deletes
projection rows in the same transaction as the events they came from, a
rebuild from the compacted log reproduces the live projections exactly.
Only streams written since the last compaction are examined, so a run costs
what was written since, not the size of the log.

The work is split into small transactions (a few dozen streams, a few
hundred jobs), so other writers, the scheduler's ticks above all, never wait
for more than one of them. The examined position moves only when a run
completes; a run cut short (a crash, a stop) is simply done again.

Run by the lease holder, every transaction carries the lease's fence and
checks its term as it opens (the same check a tick batch makes), so a holder
frozen past its lease's expiry, then resumed, deletes nothing more: its next
transaction raises LeaseLost.
"""

from __future__ import annotations

import threading
from typing import Any, Final

from sqlalchemy import Select, and_, bindparam, delete, func, or_, select, text, update
from sqlalchemy.engine import Connection

from headgate._domain.events import EnqueueAttempted, ScheduleDefined
from headgate._domain.retention import (
    ATTEMPTS_KEPT_ON,
    NEWEST_OF_A_TYPE_KEPT,
    RUNS_SHOWN,
    UNTRIMMED_EVENTS,
    CompactionPolicy,
)
from headgate._domain.streams import MANUAL_PREFIX, job_stream, prefix_upper_bound
from headgate._store.mapper import type_name
from headgate._store.port import CompactionReport, Fence
from headgate._store.sql.backends import dialect_of
from headgate._store.sql.database import Database
from headgate._store.sql.engine import translated_errors
from headgate._store.sql.log import SqlEventLog
from headgate._store.sql.predicates import FINISHED_JOBS_WHERE
from headgate._store.sql.projector import CHUNK
from headgate._store.sql.schema import LIVE, compaction_state, events, log_head

ATTEMPT_TYPE: Final = type_name(EnqueueAttempted)
DEFINITION_TYPE: Final = type_name(ScheduleDefined)
UNTRIMMED_TYPES: Final = tuple(type_name(event_type) for event_type in UNTRIMMED_EVENTS)
"""Streams of these events are never trimmed (jobs, manual-run keys): they go whole."""


STREAMS_PER_TRANSACTION: Final = 50
JOBS_PER_TRANSACTION: Final = 500


def compact(
    database: Database,
    log: SqlEventLog,
    policy: CompactionPolicy | None = None,
    cancel: threading.Event | None = None,
    *,
    fence: Fence | None = None,
    streams_per_transaction: int = STREAMS_PER_TRANSACTION,
    jobs_per_transaction: int = JOBS_PER_TRANSACTION,
) -> CompactionReport:
    """One compaction run; with `cancel` set it stops between transactions. With
    `fence`, every transaction is refused (LeaseLost) once the lease has moved
    on or expired."""
    policy = policy or CompactionPolicy()
    stopped = cancel or threading.Event()
    # What to examine is read outside any write: the scan may be long, and
    # streams written meanwhile are examined by the next run.
    until = log.head()
    with database.reading("reading what to compact") as connection:
        since = int(connection.execute(select(compaction_state.c.position)).scalar_one())
        touched = _streams_written_between(connection, since, until)
    deleted = jobs_removed = 0
    for start in range(0, len(touched), streams_per_transaction):
        if stopped.is_set():
            return CompactionReport(len(touched), deleted, jobs_removed)
        with log.write(fence) as transaction:
            chunk = touched[start : start + streams_per_transaction]
            deleted += _trim_streams(transaction.connection, chunk, policy)
    while not stopped.is_set():
        with log.write(fence) as transaction:
            removed, job_events = _remove_finished_jobs(
                transaction.connection, transaction.now_ms, policy, jobs_per_transaction
            )
        jobs_removed, deleted = jobs_removed + removed, deleted + job_events
        if removed < jobs_per_transaction:
            break
    if stopped.is_set():
        return CompactionReport(len(touched), deleted, jobs_removed)
    with log.write(fence) as transaction:
        deleted += _expire_manual_keys(transaction.connection, transaction.now_ms, policy)
        transaction.connection.execute(update(compaction_state).values(position=until))
    with translated_errors("reclaiming space after compaction"):
        database.backend.maintenance.reclaim_space(database.engine, [events, log_head, *LIVE.all()])
    return CompactionReport(len(touched), deleted, jobs_removed)


def _streams_written_between(connection: Connection, after: int, until: int) -> list[str]:
    query = (
        select(events.c.stream_id)
        .where(
            events.c.position > after,
            events.c.position <= until,
            ~events.c.type.in_(UNTRIMMED_TYPES),
        )
        .distinct()
        .order_by(events.c.stream_id)
    )
    return [str(stream) for stream in connection.execute(query).scalars()]


def _trim_streams(connection: Connection, streams: list[str], policy: CompactionPolicy) -> int:
    """Keep the newest event of each type, and the newest attempts and definitions on
    schedule streams (`retention.newest_kept`); the history rows of the attempts
    removed go with them."""
    deleted = 0
    for start in range(0, len(streams), CHUNK):
        chunk = streams[start : start + CHUNK]
        rank = (
            func.row_number()
            .over(
                partition_by=(events.c.stream_id, events.c.type), order_by=events.c.version.desc()
            )
            .label("rank")
        )
        ranked = (
            select(events.c.position, events.c.stream_id, events.c.type, rank)
            .where(events.c.stream_id.in_(chunk))
            .subquery()
        )
        on_schedule = and_(
            ranked.c.stream_id >= ATTEMPTS_KEPT_ON,
            ranked.c.stream_id < prefix_upper_bound(ATTEMPTS_KEPT_ON),
        )
        is_attempt = and_(ranked.c.type == ATTEMPT_TYPE, on_schedule)
        is_definition = and_(ranked.c.type == DEFINITION_TYPE, on_schedule)
        doomed = select(ranked.c.position).where(
            or_(
                and_(is_attempt, ranked.c.rank > policy.attempts_per_schedule),
                and_(is_definition, ranked.c.rank > policy.definitions_per_schedule),
                and_(~is_attempt, ~is_definition, ranked.c.rank > NEWEST_OF_A_TYPE_KEPT),
            )
        )
        gone = connection.execute(
            delete(events)
            .where(events.c.position.in_(doomed))
            .returning(events.c.position, events.c.type)
        ).all()
        _forget_history(connection, [position for position, type_ in gone if type_ == ATTEMPT_TYPE])
        deleted += len(gone)
    return deleted


def _forget_history(connection: Connection, attempt_positions: list[int]) -> None:
    """Delete the history rows of these attempts (a row is keyed by its event's position)."""
    if not attempt_positions:
        return
    history = LIVE.enqueue_history
    connection.execute(
        delete(history).where(history.c.event_id == bindparam("position")),
        [{"position": position} for position in attempt_positions],
    )


def _remove_finished_jobs(
    connection: Connection, now_ms: int, policy: CompactionPolicy, limit: int
) -> tuple[int, int]:
    """Remove up to `limit` jobs finished longer ago than the retention, with their streams."""
    jobs = LIVE.jobs
    cutoff = policy.finished_jobs_cutoff(now_ms)
    query = finished_jobs_query(cutoff, limit, policy.runs_per_schedule)
    finished = list(connection.execute(query).scalars())
    if not finished:
        return 0, 0
    streams = [job_stream(job_id) for job_id in finished]
    with dialect_of(connection).probing_indexes(connection):
        event_count = connection.execute(
            delete(events).where(events.c.stream_id.in_(streams))
        ).rowcount
        connection.execute(delete(jobs).where(jobs.c.job_id.in_(finished)))
        for rows in (LIVE.job_attempts, LIVE.schedule_runs):
            connection.execute(delete(rows).where(rows.c.job_id.in_(finished)))
    return len(finished), int(event_count)


def finished_jobs_query(
    finished_before_ms: int, limit: int, runs_per_schedule: int = RUNS_SHOWN
) -> Select[Any]:
    """Jobs in a removable state (`retention.REMOVABLE_JOB_STATES`, as the partial
    index's predicate names them) last changed before the cutoff, but for each
    schedule's newest `runs_per_schedule` runs.

    A run is among its schedule's newest when its position is at least the
    position of the schedule's `runs_per_schedule`-th newest run, read on the
    runs' index (that many entries per job examined)."""
    jobs, runs = LIVE.jobs, LIVE.schedule_runs
    newer = runs.alias("newer")
    oldest_kept = (
        select(newer.c.position)
        .where(newer.c.schedule_id == runs.c.schedule_id)
        .order_by(newer.c.position.desc())
        .limit(1)
        .offset(runs_per_schedule - 1)
        .scalar_subquery()
    )
    kept_run = (
        select(runs.c.job_id)
        .where(
            runs.c.job_id == jobs.c.job_id,
            or_(oldest_kept.is_(None), runs.c.position >= oldest_kept),
        )
        .exists()
    )
    return (
        select(jobs.c.job_id)
        .where(
            text(FINISHED_JOBS_WHERE),  # as the partial index is written, so it is used
            jobs.c.updated_at_ms < finished_before_ms,
            ~kept_run,
        )
        .limit(limit)
    )


def _expire_manual_keys(connection: Connection, now_ms: int, policy: CompactionPolicy) -> int:
    statement = delete(events).where(
        events.c.stream_id >= MANUAL_PREFIX,
        events.c.stream_id < prefix_upper_bound(MANUAL_PREFIX),
        events.c.recorded_at_ms < policy.manual_keys_cutoff(now_ms),
    )
    return int(connection.execute(statement).rowcount)
