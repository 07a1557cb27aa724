"""Fault injection by wrapping a store: the port's operations, with hooks around them.

A test builds `FaultyStore(SqlStore(url, clock))`, hands it to `Headgate`, and
sets the hooks on its `faults` (at any time: they are read on every call) to
fail an append, kill the process at a step, or watch what was written. The
real store does all the work; nothing of it is patched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from headgate._domain.decisions import Candidate, GateFacts
from headgate._domain.events import DomainEvent, EnqueueAttempted, RecordedEvent
from headgate._projections import JobRow, ScheduleRow
from headgate._store.port import (
    CompactionPolicy,
    CompactionReport,
    EventLog,
    Fence,
    Listener,
    Reads,
    Store,
    Unit,
    UnitResult,
    WorkerRow,
    WriteTransaction,
)


@dataclass
class Faults:
    before_append: Callable[[Sequence[Unit]], None] | None = None
    """Called with the units before they are appended; raise to fail the append."""
    after_append: Callable[[Sequence[Unit], int | None], None] | None = None
    """Called once they are appended, inside the transaction, with the write's
    `record_at_ms` (set for a commit held for an instant)."""
    after_commit: Callable[[Sequence[Unit]], None] | None = None
    """Called after a write committed, with every unit it appended."""
    after_claims_commit: Callable[[Sequence[JobRow]], None] | None = None
    """Called after a write that claimed jobs committed, with the rows it claimed
    (a claim is the rows' state, not an appended unit)."""
    around_compaction: (
        Callable[[Callable[[], CompactionReport], threading.Event | None], CompactionReport] | None
    ) = None
    """Runs a compaction (the callable, given the run's cancel event) its own way:
    slowly, or not at all."""
    before_schema_read: Callable[[], None] | None = None
    """Called before the schema revision is read; raise to fail the read."""
    before_earliest_due_read: Callable[[], None] | None = None
    """Called before the scheduler reads when the next schedule is due (after a
    sweep found nothing due): to change the store between the two reads."""


def die() -> None:
    """Kill this process at once, as SIGKILL or an OOM kill would."""
    os.kill(os.getpid(), signal.SIGKILL)


def records_ticks(units: Iterable[Unit]) -> bool:
    """Whether the units include an enqueue-attempt record (a tick, not a definition)."""
    return any(
        isinstance(event, EnqueueAttempted) for unit in units for a in unit for event in a.events
    )


class FaultyTransaction(WriteTransaction):
    def __init__(self, inner: WriteTransaction, faults: Faults, record_at_ms: int | None) -> None:
        self._inner = inner
        self._faults = faults
        self._record_at_ms = record_at_ms
        self.appended: list[Unit] = []
        self.claimed: list[JobRow] = []

    @property
    def now_ms(self) -> int:
        return self._inner.now_ms

    @property
    def head(self) -> int:
        return self._inner.head

    def stream_versions(self, stream_ids: Iterable[str]) -> dict[str, int]:
        return self._inner.stream_versions(stream_ids)

    def new_streams(self, stream_ids: Iterable[str]) -> None:
        self._inner.new_streams(stream_ids)

    def first_events(self, stream_ids: Iterable[str]) -> dict[str, DomainEvent]:
        return self._inner.first_events(stream_ids)

    def append_units(self, units: Sequence[Unit]) -> list[UnitResult]:
        if self._faults.before_append is not None:
            self._faults.before_append(units)
        results = self._inner.append_units(units)
        self.appended.extend(
            unit for unit, result in zip(units, results, strict=True) if isinstance(result, list)
        )
        if self._faults.after_append is not None:
            self._faults.after_append(units, self._record_at_ms)
        return results

    def schedule(self, schedule_id: str) -> ScheduleRow | None:
        return self._inner.schedule(schedule_id)

    def schedules(self, schedule_ids: Collection[str]) -> dict[str, ScheduleRow]:
        return self._inner.schedules(schedule_ids)

    def declared_schedules(self, declared_by: str) -> list[ScheduleRow]:
        return self._inner.declared_schedules(declared_by)

    def job(self, job_id: str) -> JobRow | None:
        return self._inner.job(job_id)

    def gate_facts(
        self, candidates: Sequence[Candidate], count_queues: Collection[str]
    ) -> GateFacts:
        return self._inner.gate_facts(candidates, count_queues)

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobRow]:
        return self._inner.jobs(job_ids)

    def job_for_tick(self, schedule_id: str, tick_ms: int) -> JobRow | None:
        return self._inner.job_for_tick(schedule_id, tick_ms)

    def claim(
        self,
        capacity: Mapping[str, int],
        timeouts_ms: Mapping[str, int],
        worker_id: str,
        now_ms: int,
    ) -> list[JobRow]:
        rows = self._inner.claim(capacity, timeouts_ms, worker_id, now_ms)
        self.claimed.extend(rows)
        return rows

    def running_on(self, worker_ids: Collection[str]) -> list[JobRow]:
        return self._inner.running_on(worker_ids)

    def pending_like(self, kind: str, payload: str, limit: int) -> list[JobRow]:
        return self._inner.pending_like(kind, payload, limit)

    def crash_blame(self, fingerprints: Collection[str]) -> dict[str, int]:
        return self._inner.crash_blame(fingerprints)

    def quarantined(self, fingerprints: Collection[str]) -> frozenset[str]:
        return self._inner.quarantined(fingerprints)

    def expired_workers(self, now_ms: int) -> list[WorkerRow]:
        return self._inner.expired_workers(now_ms)

    def forget_workers(self, workers: Collection[WorkerRow]) -> None:
        self._inner.forget_workers(workers)

    def notify_enqueued(self, queues: Collection[str]) -> None:
        self._inner.notify_enqueued(queues)

    def late_jobs(
        self, queues: Collection[str], kinds: Collection[str], now_ms: int, limit: int
    ) -> list[JobRow]:
        return self._inner.late_jobs(queues, kinds, now_ms, limit)

    def rate_slot_frees_at(self, now_ms: int) -> int | None:
        return self._inner.rate_slot_frees_at(now_ms)

    def notify_jobs_taken(self) -> None:
        self._inner.notify_jobs_taken()


class FaultyLog(EventLog):
    def __init__(self, inner: EventLog, faults: Faults) -> None:
        self._inner = inner
        self._faults = faults

    @contextlib.contextmanager
    def write(
        self,
        fence: Fence | None = None,
        *,
        record_at_ms: int | None = None,
        while_rebuilding: bool = False,
    ) -> Iterator[WriteTransaction]:
        with self._inner.write(
            fence, record_at_ms=record_at_ms, while_rebuilding=while_rebuilding
        ) as inner:
            transaction = FaultyTransaction(inner, self._faults, record_at_ms)
            yield transaction
        if self._faults.after_commit is not None:
            self._faults.after_commit(transaction.appended)
        if self._faults.after_claims_commit is not None and transaction.claimed:
            self._faults.after_claims_commit(transaction.claimed)

    @contextlib.contextmanager
    def write_within(self, host: object) -> Iterator[WriteTransaction]:
        with self._inner.write_within(host) as inner:
            yield FaultyTransaction(inner, self._faults, None)

    def checkpoint(self) -> None:
        self._inner.checkpoint()

    def read_stream(self, stream_id: str) -> list[RecordedEvent]:
        return self._inner.read_stream(stream_id)

    def read_stream_back(
        self,
        stream_id: str,
        *,
        until_ms: int | None = None,
        before_version: int | None = None,
        types: Collection[type[DomainEvent]] | None = None,
        limit: int = 100,
    ) -> list[RecordedEvent]:
        return self._inner.read_stream_back(
            stream_id, until_ms=until_ms, before_version=before_version, types=types, limit=limit
        )

    def oldest_kept(self, stream_id: str) -> RecordedEvent | None:
        return self._inner.oldest_kept(stream_id)

    def read_all(
        self, after_position: int = 0, limit: int = 1000, until_position: int | None = None
    ) -> list[RecordedEvent]:
        return self._inner.read_all(after_position, limit, until_position)

    def head(self) -> int:
        return self._inner.head()

    def stream_version(self, stream_id: str) -> int:
        return self._inner.stream_version(stream_id)


class FaultyReads:
    """The store's reads, with a hook before `earliest_due_at`; the rest as they are."""

    def __init__(self, inner: Reads, faults: Faults) -> None:
        self._inner = inner
        self._faults = faults

    def earliest_due_at(self) -> int | None:
        if self._faults.before_earliest_due_read is not None:
            self._faults.before_earliest_due_read()
        return self._inner.earliest_due_at()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class FaultyStore(Store):
    def __init__(self, inner: Store, faults: Faults | None = None) -> None:
        self.inner = inner
        self.faults = faults if faults is not None else Faults()
        self.clock = inner.clock
        self.log = FaultyLog(inner.log, self.faults)
        self.leases = inner.leases
        self.workers = inner.workers
        self.reads = FaultyReads(inner.reads, self.faults)
        self.activity = inner.activity
        self.sessions = inner.sessions
        self.handlers = inner.handlers

    def schema_revision(self) -> int:
        if self.faults.before_schema_read is not None:
            self.faults.before_schema_read()
        return self.inner.schema_revision()

    def listen(self, on_enqueued: Callable[[str], None]) -> Listener | None:
        return self.inner.listen(on_enqueued)

    def compact(
        self,
        policy: CompactionPolicy | None = None,
        cancel: threading.Event | None = None,
        *,
        fence: Fence | None = None,
    ) -> CompactionReport:
        run = lambda: self.inner.compact(policy, cancel, fence=fence)  # noqa: E731
        if self.faults.around_compaction is not None:
            return self.faults.around_compaction(run, cancel)
        return run()

    def close(self) -> None:
        self.inner.close()
