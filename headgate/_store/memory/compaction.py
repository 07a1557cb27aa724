"""Compaction in memory: the domain's retention rules (`headgate._domain.retention`)
applied to the memory store's log and read models.

Runs as the SQL compaction does (see `Store.compact`): streams written since
the last completed run are trimmed, finished jobs past retention go with
their streams and rows, expired manual-run keys go, each step in write
transactions that carry the fence and that `cancel` can stop between. The
projection rows of what it deletes go in the same transaction, so a rebuild
would reproduce the read models exactly.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Final

from headgate._domain.events import EnqueueAttempted
from headgate._domain.retention import (
    UNTRIMMED_EVENTS,
    CompactionPolicy,
    finished_job_expired,
    manual_key_expired,
    trimmed_versions,
)
from headgate._domain.streams import MANUAL_PREFIX, job_stream
from headgate._projections import JobRow, ScheduleRunRow
from headgate._store.mapper import EVENT_TYPES, type_name
from headgate._store.memory.events import StoredEvent
from headgate._store.memory.log import MemoryEventLog
from headgate._store.memory.schema import OF_JOB
from headgate._store.memory.state import MemoryState
from headgate._store.memory.tables import Rows
from headgate._store.memory.transaction import MemoryWriteTransaction
from headgate._store.port import CompactionReport, Fence

UNTRIMMED_TYPES: Final = frozenset(type_name(event_type) for event_type in UNTRIMMED_EVENTS)
ATTEMPT_TYPE: Final = type_name(EnqueueAttempted)
STREAMS_PER_TRANSACTION: Final = 50
JOBS_PER_TRANSACTION: Final = 500


def compact(
    state: MemoryState,
    log: MemoryEventLog,
    policy: CompactionPolicy | None = None,
    cancel: threading.Event | None = None,
    *,
    fence: Fence | None = None,
) -> CompactionReport:
    policy = policy or CompactionPolicy()
    stopped = cancel or threading.Event()
    with state.reading():
        until = state.log.head
        touched = _streams_written_between(state, state.compacted_up_to, until)
    deleted = jobs_removed = 0
    for start in range(0, len(touched), STREAMS_PER_TRANSACTION):
        if stopped.is_set():
            return CompactionReport(len(touched), deleted, jobs_removed)
        with log.write(fence) as transaction:
            chunk = touched[start : start + STREAMS_PER_TRANSACTION]
            deleted += sum(_trim(transaction, stream_id, policy) for stream_id in chunk)
    while not stopped.is_set():
        with log.write(fence) as transaction:
            removed, job_events = _remove_finished_jobs(transaction, policy, JOBS_PER_TRANSACTION)
        jobs_removed, deleted = jobs_removed + removed, deleted + job_events
        if removed < JOBS_PER_TRANSACTION:
            break
    if stopped.is_set():
        return CompactionReport(len(touched), deleted, jobs_removed)
    with log.write(fence) as transaction:
        deleted += _expire_manual_keys(transaction, policy)
        transaction.compacted_up_to = until
    return CompactionReport(len(touched), deleted, jobs_removed)


def _streams_written_between(state: MemoryState, after: int, until: int) -> list[str]:
    """Streams with an event in (after, until] that may be trimmed, by id."""
    written = state.log.between(after, until, until - after)
    return sorted({e.stream_id for e in written if e.type not in UNTRIMMED_TYPES})


def _trim(transaction: MemoryWriteTransaction, stream_id: str, policy: CompactionPolicy) -> int:
    """Delete what the retention rules do not keep of a stream; the history rows of
    the attempts deleted go with them."""
    events = transaction.log.stream(stream_id)
    doomed = set(
        trimmed_versions(policy, stream_id, ((e.version, EVENT_TYPES[e.type]) for e in events))
    )
    gone = [e for e in events if e.version in doomed]
    history = transaction.tables["enqueue_history"]
    for stored in gone:
        if stored.type == ATTEMPT_TYPE:
            history.put(stored.position, None)
    return transaction.log.remove(gone)


def _remove_finished_jobs(
    transaction: MemoryWriteTransaction, policy: CompactionPolicy, limit: int
) -> tuple[int, int]:
    """Remove up to `limit` jobs finished longer ago than the retention, with their
    streams and attempts; returns (jobs removed, events deleted)."""
    now = transaction.now_ms
    jobs = transaction.tables["jobs"]
    runs = transaction.tables["schedule_runs"]
    kept = _newest_runs(runs, policy.runs_per_schedule)
    finished: list[JobRow] = []
    for _, row in jobs.items():
        if row.job_id in kept:
            continue
        if finished_job_expired(policy, row.state, row.updated_at_ms, now):
            finished.append(row)
            if len(finished) == limit:
                break
    attempts = transaction.tables["job_attempts"]
    events_deleted = 0
    for row in finished:
        events_deleted += transaction.log.remove(transaction.log.stream(job_stream(row.job_id)))
        jobs.put(row.job_id, None)
        for attempt in attempts.keys_where(OF_JOB, row.job_id):
            attempts.put(attempt, None)
        runs.put(row.job_id, None)
    return len(finished), events_deleted


def _newest_runs(runs: Rows[ScheduleRunRow], per_schedule: int) -> set[str]:
    """The job ids of each schedule's newest `per_schedule` runs, which stay."""
    by_schedule: dict[str, list[ScheduleRunRow]] = defaultdict(list)
    for _, run in runs.items():
        by_schedule[run.schedule_id].append(run)
    kept: set[str] = set()
    for schedule_runs in by_schedule.values():
        schedule_runs.sort(key=lambda run: run.position, reverse=True)
        kept.update(run.job_id for run in schedule_runs[:per_schedule])
    return kept


def _expire_manual_keys(transaction: MemoryWriteTransaction, policy: CompactionPolicy) -> int:
    now = transaction.now_ms
    expired: list[StoredEvent] = []
    for stream_id in transaction.log.stream_ids():
        if stream_id.startswith(MANUAL_PREFIX):
            expired.extend(
                e
                for e in transaction.log.stream(stream_id)
                if manual_key_expired(policy, e.recorded_at_ms, now)
            )
    return transaction.log.remove(expired)
