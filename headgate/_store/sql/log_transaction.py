"""A write to the log: its transaction (`SqlWriteTransaction`), which appends units
of events at their streams' expected versions, folds the projections in the same
transaction, and reads what the writer decides on (locking it where it must).

`log.SqlEventLog.write` opens one; `write_transactions` queues writers behind each other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import (
    Callable,
    Collection,
    Hashable,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Any, Final

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from headgate._domain.admission import could_be_stored
from headgate._domain.decisions import (
    Candidate,
    GateFacts,
    lanes_of,
    overlap_schedules,
    partitions_of,
)
from headgate._domain.events import DomainEvent, JobEnqueued, RecordedEvent
from headgate._domain.streams import job_stream, schedule_stream
from headgate._errors import (
    ConcurrencyConflict,
)
from headgate._projections import AnyProjection, JobRow, ScheduleRow
from headgate._store.port import (
    ANY_VERSION,
    JOBS_TAKEN,
    Unit,
    UnitResult,
    WorkerRow,
    WriteTransaction,
)
from headgate._store.sql import (
    claiming,
    job_reads,
    quarantine_reads,
    schedule_reads,
    worker_rows,
)
from headgate._store.sql.backends import Dialect, SqlBackend
from headgate._store.sql.backends.log_order import LogOrder, stream_keys
from headgate._store.sql.event_rows import decode_values, unplaced_row
from headgate._store.sql.prepared import Prepared
from headgate._store.sql.projector import CHUNK, Projector
from headgate._store.sql.schema import events

CARRIED_HEAD: Final = "log_head"
"""In a transaction's carried state: the log head as its last writer left it."""
CARRIED_QUEUES: Final = "enqueued_on"
"""In a transaction's carried state: the queues its writers enqueued on."""
_LATEST_VERSIONS: dict[int, Prepared] = {}
_FIRST_EVENTS: dict[int, Prepared] = {}


def _first_events(dialect: Dialect) -> Prepared:
    """The first event of each stream of the batch `streams` that has one."""
    statement = _FIRST_EVENTS.get(id(dialect))
    if statement is None:
        built = dialect.first_of_each(events, dialect.each_of_bound("streams", events.c.stream_id))
        statement = _FIRST_EVENTS.setdefault(id(dialect), Prepared(built))
    return statement


def _latest_versions(dialect: Dialect) -> Prepared:
    """(stream id, its latest version or None), per id of the batch `streams`."""
    statement = _LATEST_VERSIONS.get(id(dialect))
    if statement is None:
        wanted = dialect.each_of_bound("streams", events.c.stream_id)
        latest = select(func.max(events.c.version)).where(events.c.stream_id == wanted.c.value)
        built = select(wanted.c.value, latest.scalar_subquery())
        statement = _LATEST_VERSIONS.setdefault(id(dialect), Prepared(built))
    return statement


class SqlWriteTransaction(WriteTransaction):
    def __init__(
        self,
        connection: Connection,
        backend: SqlBackend,
        projector: Projector,
        now_ms: int,
        head: int,
        *,
        order: LogOrder,
        checks_on_job_rows: bool = True,
    ) -> None:
        self.connection = connection
        """The transaction's connection, for the adapter's own maintenance code."""
        self._order = order
        self._held: set[str] = set()
        """Streams this transaction holds (`LogOrder.lock`): their versions, once
        read, stay put until it commits."""
        self._dialect = backend.dialect
        self._connector = backend.connector
        self._now_ms = now_ms
        self._projector = projector
        self._head = head
        self._head_at_start = head
        self._versions: dict[str, int] = {}
        """Stream versions already learned in this transaction (stable: we hold the lock)."""
        self._enqueued_on: set[str] = set()
        """Queues to notify when this commits (sent with the head's move)."""
        self._no_blame = False
        """No fingerprint carries crash blame: read with the last claim, forgotten
        at the next append (it may add blame)."""
        self._read_schedules: dict[Hashable, ScheduleRow] = {}
        """Schedule rows read since the last append: what the next append's fold
        starts from, not read again (only a fold changes a schedule's row)."""
        self._jobs_on_rows = (
            projector.projection_of("jobs")
            if checks_on_job_rows and backend.dialect.updates_at_versions
            else None
        )
        """The jobs projection, where an attempt's end is checked and folded on its
        job row (`_append_on_job_rows`): where that saves a round trip, and not in
        a rebuild's own writes (the live rows may be behind the log then)."""

    @property
    def now_ms(self) -> int:
        return self._now_ms

    @property
    def head(self) -> int:
        return self._head

    def hold(self, keys: Collection[str]) -> None:
        """Hold these keys (`LogOrder.lock`) until the transaction ends."""
        self._order.lock(self.connection, keys)

    def _hold_streams(self, stream_ids: Iterable[str]) -> None:
        if not self._order.locks_per_stream:
            return
        new = [stream_id for stream_id in stream_ids if stream_id not in self._held]
        if new:
            self._order.lock(self.connection, stream_keys(new))
            self._held.update(new)

    def _note_versions(self, versions: Iterable[tuple[str, int]]) -> None:
        """Versions read from rows: known from now on where nobody else can move
        them (the whole log held, or the stream)."""
        if self._order.locks_per_stream:
            self._versions.update((s, v) for s, v in versions if s in self._held)
        else:
            self._versions.update(versions)

    def stream_versions(self, stream_ids: Iterable[str]) -> dict[str, int]:
        ids = list(dict.fromkeys(stream_ids))
        self._hold_streams(ids)
        known = self._versions
        versions: dict[str, int] = {}
        wanted: list[str] = []
        for stream_id in ids:
            if stream_id in known:
                versions[stream_id] = known[stream_id]
            else:
                versions[stream_id] = 0
                wanted.append(stream_id)
        latest = _latest_versions(self._dialect)
        for start in range(0, len(wanted), CHUNK):
            chunk = self._dialect.batch_value(wanted[start : start + CHUNK])
            versions.update(
                {
                    stream: int(version)
                    for stream, version in latest.run(self.connection, streams=chunk)
                    if version is not None
                }
            )
        known.update((stream_id, versions[stream_id]) for stream_id in wanted)
        return versions

    def new_streams(self, stream_ids: Iterable[str]) -> None:
        self._versions.update((stream_id, 0) for stream_id in stream_ids)

    def first_events(self, stream_ids: Iterable[str]) -> dict[str, DomainEvent]:
        # A stream known to be at version 0 has no first event to read.
        wanted = [s for s in dict.fromkeys(stream_ids) if self._versions.get(s) != 0]
        found: dict[str, DomainEvent] = {}
        statement = _first_events(self._dialect)
        for start in range(0, len(wanted), CHUNK):
            chunk = self._dialect.batch_value(wanted[start : start + CHUNK])
            for values in statement.run(self.connection, streams=chunk):
                recorded = decode_values(values)
                found[recorded.stream_id] = recorded.event
        # A stream without a first event does not exist: its version is known.
        self._note_versions((stream_id, 0) for stream_id in wanted if stream_id not in found)
        return found

    def append_units(self, units: Sequence[Unit]) -> list[UnitResult]:
        self._hold_streams(a.stream_id for unit in units for a in unit)
        on_rows = self._append_on_job_rows(units)
        after = self.stream_versions(
            a.stream_id for index, unit in enumerate(units) if index not in on_rows for a in unit
        )  # each unit sees the versions the units before it left
        after.update(on_rows.values())
        placed: list[tuple[str, int, DomainEvent]] = []
        on_job_rows: list[int] = []
        parts: list[ConcurrencyConflict | slice] = []
        for index, unit in enumerate(units):
            conflict = None if index in on_rows else _first_conflict(unit, after)
            if conflict is not None:
                parts.append(conflict)
                continue
            first = len(placed)
            if index in on_rows:
                on_job_rows.append(first)
            for stream_append in unit:
                for event in stream_append.events:
                    after[stream_append.stream_id] += 1
                    placed.append((stream_append.stream_id, after[stream_append.stream_id], event))
            parts.append(slice(first, len(placed)))
        recorded = self._insert_events(placed)
        self._versions.update(after)
        self._no_blame = False
        if recorded:
            known = {"schedules": self._read_schedules} if self._read_schedules else None
            folded = {recorded[place].position for place in on_job_rows}
            self._projector.fold_live(self.connection, recorded, known, folded={"jobs": folded})
        self._read_schedules = {}  # the fold may have changed them
        return [part if isinstance(part, ConcurrencyConflict) else recorded[part] for part in parts]

    def _insert_events(self, placed: Sequence[tuple[str, int, DomainEvent]]) -> list[RecordedEvent]:
        """Insert the events at their streams' versions, at new positions in this
        order (drawn in the same statement where the backend can)."""
        if not placed:
            return []
        now = self._now_ms
        rows = [
            unplaced_row(stream_id, version, now, event) for stream_id, version, event in placed
        ]
        positions = self._order.insert_drawing(self.connection, events, rows)
        if positions is None:
            positions = self._order.draw(self.connection, len(rows), self._head)
            for row, position in zip(rows, positions, strict=True):
                row["position"] = position
            self._dialect.bulk_insert(self.connection, events, rows)
        self._head = positions[-1]
        return [
            RecordedEvent(position, stream_id, version, now, event)
            for position, (stream_id, version, event) in zip(positions, placed, strict=True)
        ]

    def _append_on_job_rows(self, units: Sequence[Unit]) -> dict[int, tuple[str, int]]:
        """The units that end a job's attempt (one event on a job's stream, at an
        expected version this transaction has not read), checked and folded on
        the job rows themselves: the jobs projection's update, made only where
        the row is at the expected version (`Dialect.update_at_versions`). A
        job row's version is its stream's (every event on the stream folds
        into it in the transaction that appends it), and this transaction
        holds the streams, so that is the compare-and-set without a read of
        the log. The rest (and a row at another version, or none) are checked
        against the log as any unit is. By unit index, the stream and the
        version it was at, of each unit whose job row took it."""
        jobs = self._jobs_on_rows
        if jobs is None:
            return {}
        appearances = Counter(a.stream_id for unit in units for a in unit)
        candidates: list[tuple[int, str, int]] = []
        rows: list[dict[str, Any]] = []
        for index, unit in enumerate(units):
            if len(unit) != 1 or len(unit[0].events) != 1:
                continue
            (stream_append,) = unit
            stream_id, expected = stream_append.stream_id, stream_append.expected_version
            if expected < 1 or appearances[stream_id] > 1 or stream_id in self._versions:
                continue
            # Not yet given its position: the jobs fold's `changes` reads none.
            unplaced = RecordedEvent(
                0, stream_id, expected + 1, self._now_ms, stream_append.events[0]
            )
            job_id, delta = jobs.key(unplaced), _changes(jobs, unplaced)
            if job_id is None or delta is None or stream_id != job_stream(str(job_id)):
                continue
            candidates.append((index, str(job_id), expected))
            rows.append({**delta, jobs.key_column: job_id})
        if not rows:
            return {}
        updated = self._dialect.update_at_versions(
            self.connection,
            self._projector.table_for(jobs),
            jobs.key_column,
            rows,
            [expected for _, _, expected in candidates],
        )
        return {
            index: (job_stream(job_id), expected)
            for index, job_id, expected in candidates
            if job_id in updated
        }

    def hand_on(self, carried: dict[str, Any]) -> None:
        """Its block is done: where the log head now is (if it appended), and the
        queues it enqueued on, left for the transaction's later writers and its
        closing (`SqlEventLog._close_transaction`)."""
        if self._head != self._head_at_start and self._order.moves_head:
            carried[CARRIED_HEAD] = self._head
        if self._enqueued_on:
            carried.setdefault(CARRIED_QUEUES, set()).update(self._enqueued_on)

    def schedule(self, schedule_id: str) -> ScheduleRow | None:
        row = schedule_reads.schedule(self.connection, schedule_id)
        if row is not None:
            self._learn_schedule_versions([row])
            self._read_schedules[schedule_id] = row
        return row

    def schedules(self, schedule_ids: Collection[str]) -> dict[str, ScheduleRow]:
        rows = schedule_reads.schedules(self.connection, schedule_ids)
        self._learn_schedule_versions(rows.values())
        self._read_schedules.update(rows)
        if self._projector.has_table("schedules"):
            # Schedule rows are never removed (a delete marks them), so a schedule
            # without one has no stream yet: its first definition needs no read.
            self._versions.update(
                (schedule_stream(schedule_id), 0)
                for schedule_id in schedule_ids
                if schedule_id not in rows and could_be_stored(schedule_id)
            )
        return rows

    def declared_schedules(self, declared_by: str) -> list[ScheduleRow]:
        rows = schedule_reads.declared_schedules(self.connection, declared_by)
        self._learn_schedule_versions(rows)
        return rows

    def _learn_schedule_versions(self, rows: Iterable[ScheduleRow]) -> None:
        """A schedule row's version is its stream's, as a job row's is (every event
        on a schedule's stream folds into its row, deleted ones included)."""
        self._note_versions((schedule_stream(row.schedule_id), row.version) for row in rows)

    @property
    def _for_update(self) -> bool:
        """Job rows read to decide on are locked where writers run side by side: a
        claim must not move a job on between the decision and its write."""
        return self._order.locks_per_stream

    def job(self, job_id: str) -> JobRow | None:
        self._hold_streams([job_stream(job_id)])
        return self._learn_one(job_reads.job(self.connection, job_id, for_update=self._for_update))

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobRow]:
        self._hold_streams(job_stream(job_id) for job_id in sorted(job_ids))
        rows = job_reads.jobs(self.connection, job_ids, for_update=self._for_update)
        self._learn_versions(list(rows.values()))
        return rows

    def job_for_tick(self, schedule_id: str, tick_ms: int) -> JobRow | None:
        row = job_reads.job_for_tick(
            self.connection, schedule_id, tick_ms, for_update=self._for_update
        )
        return self._learn_one(row)

    def _learn_one(self, row: JobRow | None) -> JobRow | None:
        if row is not None:
            self._learn_versions([row])
        return row

    def claim(
        self,
        capacity: Mapping[str, int],
        timeouts_ms: Mapping[str, int],
        worker_id: str,
        now_ms: int,
    ) -> list[JobRow]:
        with self._dialect.probing_indexes(self.connection):
            rows, blame_seen = claiming.claim(
                self.connection, capacity, timeouts_ms, worker_id, now_ms, hold=self.hold
            )
        self._no_blame = not blame_seen
        return self._learn_versions(rows)

    def late_jobs(
        self, queues: Collection[str], kinds: Collection[str], now_ms: int, limit: int
    ) -> list[JobRow]:
        return self._held_rows(
            lambda: job_reads.late_jobs(self.connection, queues, kinds, now_ms, limit)
        )

    def rate_slot_frees_at(self, now_ms: int) -> int | None:
        return claiming.rate_slot_frees_at(self.connection, now_ms)

    def running_on(self, worker_ids: Collection[str]) -> list[JobRow]:
        return self._held_rows(lambda: job_reads.running_on(self.connection, worker_ids))

    def pending_like(self, kind: str, payload: str, limit: int) -> list[JobRow]:
        return self._held_rows(
            lambda: job_reads.pending_like(self.connection, kind, payload, limit)
        )

    def _held_rows(self, find: Callable[[], list[JobRow]]) -> list[JobRow]:
        """The job rows `find` reads, to decide on, locked as every writer locks a
        job: its stream first, then its row (a writer that appends to a job's
        stream folds into its row after; the other order beside it deadlocks).
        So the rows are found, their streams held, their rows locked, and `find`
        asked again: those it still finds are the answer, unchanged until this
        transaction ends (one that no longer fits is left out; one new to it is
        left to the next call)."""
        if not self._order.locks_per_stream:
            return self._learn_versions(find())
        found = find()
        if not found:
            return []
        ids = [row.job_id for row in found]
        self._hold_streams(job_stream(job_id) for job_id in sorted(ids))
        locked = job_reads.jobs(self.connection, ids, for_update=True)
        still = {row.job_id for row in find()}
        return self._learn_versions(
            [locked[job_id] for job_id in ids if job_id in locked and job_id in still]
        )

    def _learn_versions(self, rows: list[JobRow]) -> list[JobRow]:
        """A job row's version is its stream's: the projection is written in the
        transaction that appends, and no other writer of a stream this one
        holds runs beside it, so the append that follows needs no read of its
        own."""
        self._note_versions((job_stream(row.job_id), row.version) for row in rows)
        return rows

    def crash_blame(self, fingerprints: Collection[str]) -> dict[str, int]:
        if self._no_blame:  # the claim found no blame, and nothing since has changed it
            return dict.fromkeys(fingerprints, 0)
        return quarantine_reads.crash_blame(self.connection, fingerprints)

    def quarantined(self, fingerprints: Collection[str]) -> frozenset[str]:
        if not fingerprints:
            return frozenset()
        return frozenset(quarantine_reads.quarantined(self.connection, fingerprints))

    def expired_workers(self, now_ms: int) -> list[WorkerRow]:
        return worker_rows.expired(self.connection, now_ms)

    def forget_workers(self, workers: Collection[WorkerRow]) -> None:
        worker_rows.forget(self.connection, workers)

    def notify_enqueued(self, queues: Collection[str]) -> None:
        self._enqueued_on.update(queues)

    def notify_jobs_taken(self) -> None:
        self._enqueued_on.add(JOBS_TAKEN)

    def gate_facts(
        self, candidates: Sequence[Candidate], count_queues: Collection[str]
    ) -> GateFacts:
        if not candidates:
            return GateFacts({}, {}, frozenset(), {})
        connection = self.connection
        if self._order.locks_per_stream:
            self._hold_streams(sorted(job_stream(c.job.job_id) for c in candidates))
            self.hold(admission_keys(candidates, count_queues))
        first = self.first_events(job_stream(c.job.job_id) for c in candidates)
        existing = {
            event.job_id: event for event in first.values() if isinstance(event, JobEnqueued)
        }
        keys = [c.job.unique_key for c in candidates if c.job.unique_key is not None]
        return GateFacts(
            existing_jobs=existing,
            unique_key_holders=job_reads.live_jobs_by_unique_key(connection, keys) if keys else {},
            quarantined=frozenset(
                quarantine_reads.quarantined(connection, {c.fingerprint for c in candidates})
            ),
            pending=job_reads.pending_counts(connection, count_queues) if count_queues else {},
            live_ticks=job_reads.live_ticks(connection, overlap_schedules(candidates)),
            turns=claiming.turns(connection, lanes_of(candidates), partitions_of(candidates)),
        )


def admission_keys(candidates: Sequence[Candidate], count_queues: Collection[str]) -> list[str]:
    """What an admission decides on beside its jobs' own streams, each a key the
    gate holds while it reads and writes: a unique key's holders, a capped
    queue's pending count, a serial schedule's live ticks."""
    keys = [f"unique:{c.job.unique_key}" for c in candidates if c.job.unique_key is not None]
    keys.extend(f"pending:{queue}" for queue in count_queues)
    keys.extend(f"ticks:{schedule_id}" for schedule_id in overlap_schedules(candidates))
    return keys


def _changes(projection: AnyProjection, recorded: RecordedEvent) -> dict[str, Any] | None:
    return None if projection.changes is None else projection.changes(recorded)


def _first_conflict(unit: Unit, versions: dict[str, int]) -> ConcurrencyConflict | None:
    for stream_append in unit:
        actual = versions[stream_append.stream_id]
        expected = stream_append.expected_version
        if expected not in (ANY_VERSION, actual):
            return ConcurrencyConflict(stream_append.stream_id, expected, actual)
    return None
