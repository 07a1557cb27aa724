"""A memory store's write transaction: its changes kept apart until it commits.

Appends are encoded by the mapper, folded into the read models with the
projections' own `apply` (the folds a rebuild uses), and checked against the
rules the SQL store enforces by unique index: one job per (schedule, tick),
one pending or running job per unique key. None of it reaches the committed
state before `commit`; a transaction that raises is simply dropped.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from headgate._domain import claim_policy
from headgate._domain.decisions import (
    Candidate,
    GateFacts,
    lanes_of,
    overlap_schedules,
    partitions_of,
)
from headgate._domain.events import DomainEvent, JobEnqueued, JobState, RecordedEvent
from headgate._domain.fair_share import lanes_claimed
from headgate._domain.limits import Slots
from headgate._domain.streams import job_stream
from headgate._errors import ConcurrencyConflict, ConstraintViolation
from headgate._projections import ALL_PROJECTIONS, JOBS, JobRow, ScheduleRow
from headgate._store.memory import queries
from headgate._store.memory.events import LogChanges, StoredEvent
from headgate._store.memory.schema import LIVE_UNIQUE_KEY, TICK_ORIGIN
from headgate._store.memory.state import MemoryState
from headgate._store.memory.tables import TableChanges
from headgate._store.port import (
    ANY_VERSION,
    JOBS_TAKEN,
    Unit,
    UnitResult,
    WorkerRow,
    WriteTransaction,
)

WHERE = "writing to the store"


class MemoryWriteTransaction(WriteTransaction):
    def __init__(self, state: MemoryState, now_ms: int) -> None:
        self._state = state
        self._now_ms = now_ms
        self.log = LogChanges(state.log)
        self.tables: dict[str, TableChanges[Any]] = {
            name: TableChanges(table) for name, table in state.tables.items()
        }
        self.models = queries.ReadModels.of(self.tables)
        self._forgotten: list[WorkerRow] = []
        self.enqueued_on: set[str] = set()
        """Queues to notify once this commits."""
        self.compacted_up_to: int | None = None
        """Set by a compaction run that completes: how far it examined the log."""
        self._rate_starts = {name: list(starts) for name, starts in state.rate_starts.items()}
        self._queue_turns = dict(state.queue_turns)

    @property
    def now_ms(self) -> int:
        return self._now_ms

    @property
    def head(self) -> int:
        return self.log.head

    # The event log

    def stream_versions(self, stream_ids: Iterable[str]) -> dict[str, int]:
        return {stream_id: self.log.version(stream_id) for stream_id in dict.fromkeys(stream_ids)}

    def new_streams(self, stream_ids: Iterable[str]) -> None:
        pass  # versions are read from memory anyway

    def first_events(self, stream_ids: Iterable[str]) -> dict[str, DomainEvent]:
        found: dict[str, DomainEvent] = {}
        for stream_id in dict.fromkeys(stream_ids):
            events = self.log.stream(stream_id)
            if events and events[0].version == 1:
                found[stream_id] = events[0].event()
        return found

    def append_units(self, units: Sequence[Unit]) -> list[UnitResult]:
        results: list[UnitResult] = []
        jobs_written: set[Hashable] = set()
        for unit in units:
            conflict = self._first_conflict(unit)
            if conflict is not None:
                results.append(conflict)
                continue
            recorded = [self._append(a.stream_id, event) for a in unit for event in a.events]
            for entry in recorded:
                jobs_written.update(self._fold(entry))
            results.append(recorded)
        self._check_job_rules(jobs_written)
        return results

    def _first_conflict(self, unit: Unit) -> ConcurrencyConflict | None:
        versions = self.stream_versions(a.stream_id for a in unit)
        for stream_append in unit:
            actual = versions[stream_append.stream_id]
            expected = stream_append.expected_version
            if expected not in (ANY_VERSION, actual):
                return ConcurrencyConflict(stream_append.stream_id, expected, actual)
        return None

    def _append(self, stream_id: str, event: DomainEvent) -> RecordedEvent:
        entry = RecordedEvent(
            self.log.head + 1, stream_id, self.log.version(stream_id) + 1, self._now_ms, event
        )
        self.log.append(StoredEvent.of(entry))
        return entry

    def _fold(self, entry: RecordedEvent) -> list[Hashable]:
        """Fold the event into every projection's rows; returns the jobs it wrote."""
        jobs_written: list[Hashable] = []
        for projection in ALL_PROJECTIONS:
            key = projection.key(entry)
            if key is None:
                continue
            table = self.tables[projection.table]
            before = None if projection.append_only else table.get(key)
            after = projection.apply(before, entry)
            if after is None and before is None:
                continue
            table.put(key, after)
            if projection is JOBS and after is not None:
                jobs_written.append(key)
        return jobs_written

    def _check_job_rules(self, job_ids: Iterable[Hashable]) -> None:
        """What the SQL store's unique indexes refuse, checked once the whole batch
        is folded (as a batch's rows are written there: a key freed in it may be
        taken in it)."""
        jobs = self.tables[JOBS.table]
        for job_id in job_ids:
            row: JobRow | None = jobs.get(job_id)
            if row is None:
                continue
            origin = (row.periodic_schedule_id, row.periodic_tick_ms)
            if (
                row.periodic_schedule_id is not None
                and len(jobs.keys_where(TICK_ORIGIN, origin)) > 1
            ):
                raise ConstraintViolation(
                    f"{WHERE}: a second job for one (schedule, tick) was refused: each tick has "
                    f"one job (schedule {origin[0]!r}, tick {origin[1]})"
                )
            key = row.unique_key
            if key is not None and len(jobs.keys_where(LIVE_UNIQUE_KEY, key)) > 1:
                raise ConstraintViolation(
                    f"{WHERE}: a constraint rejected the write: unique key {key!r} is held by "
                    "another pending or running job"
                )

    # Schedules

    def schedule(self, schedule_id: str) -> ScheduleRow | None:
        return queries.schedule(self.models, schedule_id)

    def schedules(self, schedule_ids: Collection[str]) -> dict[str, ScheduleRow]:
        return queries.schedules(self.models, schedule_ids)

    def declared_schedules(self, declared_by: str) -> list[ScheduleRow]:
        return queries.declared_schedules(self.models, declared_by)

    # The job queue

    def job(self, job_id: str) -> JobRow | None:
        return queries.job(self.models, job_id)

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobRow]:
        return queries.jobs(self.models, job_ids)

    def job_for_tick(self, schedule_id: str, tick_ms: int) -> JobRow | None:
        return queries.job_for_tick(self.models, schedule_id, tick_ms)

    def claim(
        self,
        capacity: Mapping[str, int],
        timeouts_ms: Mapping[str, int],
        worker_id: str,
        now_ms: int,
    ) -> list[JobRow]:
        jobs: TableChanges[JobRow] = self.tables[JOBS.table]
        claimed: list[JobRow] = []
        if not timeouts_ms or all(count <= 0 for count in capacity.values()):
            return claimed  # nothing read, so no rate start forgotten (as on SQL)
        slots = self._slots(now_ms)
        for row in queries.claimable(self.models, capacity, timeouts_ms.keys(), now_ms, slots):
            timeout_ms = row.timeout_ms if row.timeout_ms is not None else timeouts_ms[row.kind]
            running = replace(
                row,
                state=JobState.RUNNING.value,
                worker_id=worker_id,
                deadline_ms=now_ms + timeout_ms,
                updated_at_ms=now_ms,
            )
            jobs.put(row.job_id, running)
            claimed.append(running)
            rate_class = row.rate_class
            if slots is not None and rate_class is not None and rate_class in slots.rates:
                self._rate_starts.setdefault(rate_class, []).append(now_ms)
        claimed_turns = [(row.queue, row.priority, row.fair_turn) for row in claimed]
        for lane, turn in lanes_claimed(claimed_turns).items():
            self._queue_turns[lane] = max(self._queue_turns.get(lane, 0), turn)
        return claimed

    def _slots(self, now_ms: int) -> Slots | None:
        """The limits as they stand, or None when there are none; the starts no
        window of a rate class can count are dropped (at commit), as the SQL
        store's claim does."""
        limits, _ = queries.limits(self.models)
        rates = {rate.rate_class: rate for rate in queries.rate_windows(self.models)}
        if not limits and not rates:
            return None
        self._rate_starts = {
            name: claim_policy.starts_kept(starts, rates[name].limit, rates[name].per_ms, now_ms)
            if name in rates
            else starts
            for name, starts in self._rate_starts.items()
        }
        return Slots.counted(
            [row.limit() for row in limits],
            rates,
            queries.running_counts(self.models) if limits else {},
            claim_policy.recent_starts(rates.values(), self._rate_starts, now_ms),
        )

    def late_jobs(
        self, queues: Collection[str], kinds: Collection[str], now_ms: int, limit: int
    ) -> list[JobRow]:
        return queries.late_jobs(self.models, queues, kinds, now_ms, limit)

    def rate_slot_frees_at(self, now_ms: int) -> int | None:
        rates = queries.rate_windows(self.models)
        return claim_policy.rate_slot_frees_at(rates, self._rate_starts, now_ms)

    def running_on(self, worker_ids: Collection[str]) -> list[JobRow]:
        return queries.running_on(self.models, worker_ids)

    def pending_like(self, kind: str, payload: str, limit: int) -> list[JobRow]:
        return queries.pending_like(self.models, kind, payload, limit)

    def notify_enqueued(self, queues: Collection[str]) -> None:
        self.enqueued_on.update(queues)

    def notify_jobs_taken(self) -> None:
        self.enqueued_on.add(JOBS_TAKEN)

    # Admission facts

    def gate_facts(
        self, candidates: Sequence[Candidate], count_queues: Collection[str]
    ) -> GateFacts:
        if not candidates:
            return GateFacts({}, {}, frozenset(), {})
        first = self.first_events(job_stream(c.job.job_id) for c in candidates)
        keys = [c.job.unique_key for c in candidates if c.job.unique_key is not None]
        return GateFacts(
            existing_jobs={
                event.job_id: event for event in first.values() if isinstance(event, JobEnqueued)
            },
            unique_key_holders=queries.live_unique_key_holders(self.models, keys),
            quarantined=queries.quarantined(self.models, {c.fingerprint for c in candidates}),
            pending=queries.unfinished_counts(self.models, count_queues),
            live_ticks=queries.live_ticks(self.models, overlap_schedules(candidates)),
            turns=queries.turns(
                self.models, self._queue_turns, lanes_of(candidates), partitions_of(candidates)
            ),
        )

    def quarantined(self, fingerprints: Collection[str]) -> frozenset[str]:
        return queries.quarantined(self.models, fingerprints)

    def crash_blame(self, fingerprints: Collection[str]) -> dict[str, int]:
        return queries.crash_blame(self.models, fingerprints)

    # The worker registry

    def expired_workers(self, now_ms: int) -> list[WorkerRow]:
        forgotten = {row.worker_id for row in self._forgotten}
        expired = [
            row
            for row in self._state.workers.values()
            if row.expires_at_ms <= now_ms and row.worker_id not in forgotten
        ]
        return sorted(expired, key=lambda row: row.worker_id)

    def forget_workers(self, workers: Collection[WorkerRow]) -> None:
        self._forgotten.extend(workers)

    # Commit

    def commit(self) -> None:
        """Apply everything at once, under the read lock (the caller holds the
        write lock, so no heartbeat moved since this transaction read one)."""
        with self._state.reading():
            self.log.commit()
            for table in self.tables.values():
                table.commit()
            for read in self._forgotten:
                current = self._state.workers.get(read.worker_id)
                if current is not None and current.heartbeat_at_ms == read.heartbeat_at_ms:
                    del self._state.workers[read.worker_id]
            if self.compacted_up_to is not None:
                self._state.compacted_up_to = self.compacted_up_to
            self._state.rate_starts = self._rate_starts
            self._state.queue_turns = self._queue_turns
