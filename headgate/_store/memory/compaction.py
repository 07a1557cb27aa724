"""Compaction in memory: the domain's retention rules (`headgate._domain.retention`)
applied to the memory store's log and read models.

The memory store's steps for the one driver (`port.compaction.run_compaction`):
streams written since the last completed run trimmed, finished jobs past
retention removed with their streams and rows, expired manual-run keys gone.
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import AbstractContextManager
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
from headgate._store.port import Fence
from headgate._store.port.compaction import CompactionSteps

UNTRIMMED_TYPES: Final = frozenset(type_name(event_type) for event_type in UNTRIMMED_EVENTS)
ATTEMPT_TYPE: Final = type_name(EnqueueAttempted)


class MemoryCompactionSteps(CompactionSteps[MemoryWriteTransaction]):
    def __init__(self, state: MemoryState, log: MemoryEventLog) -> None:
        self._state = state
        self._log = log

    def streams_to_examine(self) -> tuple[list[str], int]:
        """Streams with an event since the last completed run that may be trimmed."""
        with self._state.reading():
            after, until = self._state.compacted_up_to, self._state.log.head
            written = self._state.log.between(after, until, until - after)
        return sorted({e.stream_id for e in written if e.type not in UNTRIMMED_TYPES}), until

    def write(self, fence: Fence | None) -> AbstractContextManager[MemoryWriteTransaction]:
        return self._log.write(fence)

    def trim(
        self, transaction: MemoryWriteTransaction, streams: list[str], policy: CompactionPolicy
    ) -> int:
        return sum(_trim(transaction, stream_id, policy) for stream_id in streams)

    def remove_finished_jobs(
        self, transaction: MemoryWriteTransaction, policy: CompactionPolicy, limit: int
    ) -> tuple[int, int]:
        return _remove_finished_jobs(transaction, policy, limit)

    def expire_manual_keys(
        self, transaction: MemoryWriteTransaction, policy: CompactionPolicy
    ) -> int:
        return _expire_manual_keys(transaction, policy)

    def mark_examined(self, transaction: MemoryWriteTransaction, position: int) -> None:
        transaction.compacted_up_to = position


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
