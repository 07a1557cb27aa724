"""The store port: everything Headgate keeps, as a small set of named operations.

The runtime, the commands and the `Headgate` facade depend on these
interfaces only. `headgate._store.sql` is the one implementation (SQLAlchemy,
on SQLite or PostgreSQL) and the only code that knows a database dialect.
What every implementation must guarantee is written once, as the contract
suite in `tests/store/contract/`, which runs against each backend.

A store has four parts:

* `EventLog`: atomic multi-stream appends with optimistic concurrency, made
  inside a serialised `WriteTransaction` that also answers the reads a
  decision needs (so a command reads exactly the state it changes);
* `Leases`: operational state (not events) with fencing terms, which make
  exactly one process hold a duty;
* `Reads`: the projections, for the scheduler's due read, the API and the
  console, each on its own short read transaction;
* compaction, which keeps the log bounded.

Errors are Headgate's own (`headgate._errors`), never a driver's:
`StoreUnavailable` (unreachable, locked past the busy timeout),
`StoreClosed`, `ProjectionsRebuilding`, `LeaseLost`, `ConcurrencyConflict`,
`ConstraintViolation` and `StoreError` for the rest.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from headgate._clock import Clock
from headgate._domain.decisions import Candidate, GateFacts
from headgate._domain.events import DomainEvent, RecordedEvent
from headgate._errors import ConcurrencyConflict
from headgate._projections import (
    EnqueueHistoryRow,
    JobAttemptRow,
    JobRow,
    QuarantineRow,
    ScheduleRow,
)

__all__ = [
    "ANY_VERSION",
    "DAY_MS",
    "NO_STREAM",
    "Claimant",
    "CompactionPolicy",
    "CompactionReport",
    "EventLog",
    "Fence",
    "JobFilter",
    "Lease",
    "Leases",
    "Listener",
    "Page",
    "ProcessIdentity",
    "Reads",
    "Store",
    "StreamAppend",
    "Unit",
    "UnitResult",
    "WorkerBeat",
    "WorkerRow",
    "Workers",
    "WriteTransaction",
]

NO_STREAM: Final = 0
"""Expected version of a stream that must not exist yet."""
ANY_VERSION: Final = -1
"""Expected version that accepts any current version."""
MAX_STREAM_ID_LENGTH: Final = 255
DAY_MS: Final = 86_400_000
T = TypeVar("T")


@dataclass(frozen=True)
class StreamAppend:
    """Events for one stream, valid only if the stream is at `expected_version`."""

    stream_id: str
    expected_version: int
    events: tuple[DomainEvent, ...]

    def __post_init__(self) -> None:
        if not 0 < len(self.stream_id) <= MAX_STREAM_ID_LENGTH:
            raise ValueError(f"stream id must be 1-{MAX_STREAM_ID_LENGTH} characters")
        if not self.events:
            raise ValueError(f"an append to {self.stream_id!r} needs at least one event")


Unit = Sequence[StreamAppend]
"""Stream appends that land together or not at all."""
UnitResult = list[RecordedEvent] | ConcurrencyConflict


@dataclass(frozen=True)
class Fence:
    """A write made under a lease: valid only while the lease is at this term."""

    lease: str
    term: int


@dataclass(frozen=True)
class Lease:
    name: str
    holder: str
    host: str
    pid: int
    term: int
    acquired_at_ms: int
    expires_at_ms: int


@dataclass(frozen=True)
class Claimant:
    """Who asks for a lease."""

    holder: str
    host: str
    pid: int


@dataclass(frozen=True)
class ProcessIdentity:
    """What tells a worker's process apart from every other process of its machine
    while that machine runs, beyond its pid (which is reused) and host name
    (which repeats): see `headgate._runtime.local_processes`."""

    boot_id: str
    """The kernel's boot id: random at each boot of each machine."""
    namespaces: str
    """The pid and time namespaces its pid and start time were read in
    (`pid:[4026531836] time:[4026531834]`)."""
    start_ticks: int
    """When it started, in clock ticks since boot (/proc/PID/stat, field 22)."""


@dataclass(frozen=True)
class WorkerBeat:
    """A worker process's heartbeat: who it is, what it serves, what it holds."""

    worker_id: str
    host: str
    pid: int
    queues: Mapping[str, int]
    """queue -> capacity."""
    started_at_ms: int
    running: int
    overdue: int
    """Handlers still running past their timeout (their threads cannot be killed)."""
    process: ProcessIdentity | None = None
    """None where the process cannot be told apart for certain (not Linux)."""


@dataclass(frozen=True)
class WorkerRow:
    worker_id: str
    host: str
    pid: int
    queues: Mapping[str, int]
    started_at_ms: int
    heartbeat_at_ms: int
    expires_at_ms: int
    running: int
    overdue: int
    process: ProcessIdentity | None = None
    """None for a worker that could not tell (or an earlier build's row)."""


@dataclass(frozen=True)
class JobFilter:
    """Which jobs a listing shows (None: any)."""

    state: str | None = None
    queue: str | None = None
    kind: str | None = None
    schedule_id: str | None = None
    """Jobs of this schedule's ticks."""
    run_now_schedule_id: str | None = None
    """Jobs this schedule's Enqueue now made."""
    made_by_schedule: str | None = None
    """Jobs this schedule made: its ticks' and its Enqueue now's."""


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None


@dataclass(frozen=True)
class CompactionPolicy:
    attempts_per_schedule: int = 100
    finished_job_retention_ms: int = DAY_MS
    manual_key_retention_ms: int = 7 * DAY_MS

    def __post_init__(self) -> None:
        if self.manual_key_retention_ms < DAY_MS:
            raise ValueError("manual_key_retention_ms: idempotency keys are kept at least 24 hours")
        if self.attempts_per_schedule < 100:
            raise ValueError("attempts_per_schedule: the history keeps the newest 100 attempts")


@dataclass(frozen=True)
class CompactionReport:
    streams_examined: int
    events_deleted: int
    jobs_removed: int


class WriteTransaction(ABC):
    """One serialised write transaction: read what a decision needs, then append.

    No other writer (in this process or any other) commits between its
    reads and its commit, so what it reads stays true until it commits.
    Appends become visible to its own reads at once; everything commits
    when the `EventLog.write` block exits cleanly, and nothing does if it
    raises.
    """

    @property
    @abstractmethod
    def now_ms(self) -> int:
        """The instant events appended here are recorded at (store time)."""

    @property
    @abstractmethod
    def head(self) -> int:
        """The last log position assigned, this transaction's appends included."""

    @abstractmethod
    def stream_versions(self, stream_ids: Iterable[str]) -> dict[str, int]:
        """Current version of each stream; 0 for a stream that does not exist."""

    @abstractmethod
    def first_events(self, stream_ids: Iterable[str]) -> dict[str, DomainEvent]:
        """The first event of each of these streams that exists.

        Only for streams compaction never trims from the front (jobs, manual
        runs): there a missing first event means a missing stream.
        """

    @abstractmethod
    def append_units(self, units: Sequence[Unit]) -> list[UnitResult]:
        """Append each unit whose expected versions all hold, in order, with gap-free
        log positions and the projections updated in this transaction.

        A unit with a stale expected version gets a `ConcurrencyConflict` in its
        result slot and writes nothing; its neighbours are appended regardless.
        """

    @abstractmethod
    def schedule(self, schedule_id: str) -> ScheduleRow | None:
        """The schedule's projection row (deleted ones included), or None."""

    @abstractmethod
    def schedules(self, schedule_ids: Collection[str]) -> dict[str, ScheduleRow]:
        """The projection rows (deleted ones included) of those schedules that have
        one, by id, read in bulk: a few queries for any number of ids, not one
        per id. Ids no store could hold are simply absent. Like every read
        here, it sees this transaction's own appends.
        """

    @abstractmethod
    def declared_schedules(self, declared_by: str) -> list[ScheduleRow]:
        """The live (not deleted) schedules whose definition the host's code of this
        declarations group declares, or declared before it was undeclared; any order."""

    @abstractmethod
    def job(self, job_id: str) -> JobRow | None:
        """The job's projection row, or None."""

    @abstractmethod
    def jobs(self, job_ids: Collection[str]) -> dict[str, JobRow]:
        """The rows of those jobs that exist, by id."""

    @abstractmethod
    def job_for_tick(self, schedule_id: str, tick_ms: int) -> JobRow | None:
        """The job crediting this (schedule, tick) as its periodic origin, in any
        state, or None (there is at most one: the store's unique index)."""

    @abstractmethod
    def claimable(
        self, capacity: Mapping[str, int], kinds: Collection[str], now_ms: int
    ) -> list[JobRow]:
        """Pending jobs of these kinds whose run_at_ms has come, per queue at most
        `capacity[queue]` of them, oldest run_at first (then by id). The caller
        claims them in this transaction, so no other writer gets them."""

    @abstractmethod
    def running_on(self, worker_ids: Collection[str]) -> list[JobRow]:
        """Jobs in state running on these workers."""

    @abstractmethod
    def pending_like(self, kind: str, payload: str, limit: int) -> list[JobRow]:
        """Pending jobs of this kind with exactly this payload (its canonical JSON
        text, as stored): one fingerprint's jobs waiting to run, oldest run_at
        first (then by id), at most `limit`. A rare read (a quarantine's), so
        it may scan the pending jobs."""

    @abstractmethod
    def crash_blame(self, fingerprints: Collection[str]) -> dict[str, int]:
        """Each fingerprint's crash blame (thousandths of a crash); 0 if none."""

    @abstractmethod
    def quarantined(self, fingerprints: Collection[str]) -> frozenset[str]:
        """Which of these fingerprints are quarantined."""

    @abstractmethod
    def expired_workers(self, now_ms: int) -> list[WorkerRow]:
        """Workers whose heartbeat has expired by now_ms."""

    @abstractmethod
    def forget_workers(self, workers: Collection[WorkerRow]) -> None:
        """Remove these heartbeat rows, as they were read (their jobs have been taken
        back). A worker that has beaten since keeps its row: it is alive after all
        (on PostgreSQL its renewal may commit inside this very transaction), and
        its row is what gets the jobs it claims next rescued should it die."""

    @abstractmethod
    def notify_enqueued(self, queues: Collection[str]) -> None:
        """When this transaction commits, wake the workers of other processes that
        listen (see `Store.listen`) for these queues; nothing where the backend
        cannot notify (they poll)."""

    @abstractmethod
    def gate_facts(
        self, candidates: Sequence[Candidate], count_queues: Collection[str]
    ) -> GateFacts:
        """What the admission gate needs to decide these candidates, read in bulk:
        the jobs that already exist under their ids, the live holders of their
        unique keys, which of their fingerprints are quarantined, and the
        pending jobs of each queue in `count_queues` (counting costs a scan
        of that queue's index, so only queues with a limit are named)."""


class EventLog(ABC):
    """The record of truth: streams of events, appended with optimistic concurrency."""

    @abstractmethod
    def write(
        self,
        fence: Fence | None = None,
        *,
        record_at_ms: int | None = None,
        while_rebuilding: bool = False,
    ) -> AbstractContextManager[WriteTransaction]:
        """A serialised write transaction; commits when the block exits cleanly.

        With `fence`, raises LeaseLost unless the lease is held at that term
        and unexpired, checked inside the transaction, so a holder paused past
        its expiry writes nothing. Raises ProjectionsRebuilding while a
        projection lags the log (decisions read projections); only maintenance
        passes `while_rebuilding`. With `record_at_ms`, events are recorded at
        that instant (or now, if later): for a commit the caller holds until
        the clock reaches it, which the store then keeps as short as it can
        (on SQLite, no checkpoint inside it: call `checkpoint` afterwards).
        Raises StoreClosed after `Store.close`.
        """

    @abstractmethod
    def checkpoint(self) -> None:
        """Fold the write-ahead log into the database without blocking anyone, where
        the backend has one to fold (SQLite); otherwise nothing."""

    @abstractmethod
    def read_stream(self, stream_id: str) -> list[RecordedEvent]:
        """The stream's events, oldest first."""

    @abstractmethod
    def read_all(
        self, after_position: int = 0, limit: int = 1000, until_position: int | None = None
    ) -> list[RecordedEvent]:
        """Events with position > after_position (and <= until_position), in log order.

        Positions are gap-free in commit order, so a reader tailing by position
        never skips an event that commits later with a lower position.
        """

    @abstractmethod
    def head(self) -> int:
        """The last assigned position (0 for an empty log)."""

    @abstractmethod
    def stream_version(self, stream_id: str) -> int:
        """The stream's latest version; 0 if it has no events."""

    def append(
        self,
        stream_id: str,
        expected_version: int,
        new_events: Sequence[DomainEvent],
        *,
        fence: Fence | None = None,
    ) -> list[RecordedEvent]:
        """Append to one stream; raises ConcurrencyConflict if it is not at `expected_version`."""
        return self.append_unit(
            [StreamAppend(stream_id, expected_version, tuple(new_events))], fence=fence
        )

    def append_unit(self, unit: Unit, *, fence: Fence | None = None) -> list[RecordedEvent]:
        """Append to several streams atomically; raises ConcurrencyConflict on any stale one."""
        (result,) = self.append_units([unit], fence=fence)
        if isinstance(result, ConcurrencyConflict):
            raise result
        return result

    def append_units(
        self, units: Sequence[Unit], *, fence: Fence | None = None
    ) -> list[UnitResult]:
        """Group commit: many independent units in one transaction."""
        with self.write(fence) as transaction:
            return transaction.append_units(units)


class Leases(ABC):
    """Named leases with fencing terms: operational state, not events.

    A lease's term increases on every takeover. A holder renews only while it
    still holds its own term and the lease has not expired; once it has
    expired anyone (the old holder included) may take it, bumping the term,
    so writes fenced with an older term are refused. Expiry is store time.

    A holder that asks for its own live lease without naming its term (it
    lost track of it: a batch reported the term lost, a renewal came back too
    late to trust, or the answer to a takeover was lost after the store made
    it) takes it again at once under the next term, rather than being refused
    until the lease expires. That is safe: a live lease is still nobody
    else's, and the term moves on, so whatever the holder sent under the term
    it no longer trusts (a batch in flight, a compaction) is refused from then
    on. Refusing would only turn a holder's lapse of memory into an outage of
    up to a whole TTL. Renewing the forgotten term instead would not be safe:
    work under it would still commit. Holder names are unique to one runtime
    start (host, pid and a random part), so no other process can do this.
    """

    @abstractmethod
    def acquire(
        self, name: str, claimant: Claimant, ttl_ms: int, current_term: int | None = None
    ) -> Lease | None:
        """Renew (if `current_term` is still ours and live), take our own live lease
        again under the next term (if it is not), or take over an expired or absent
        lease. Returns the lease when `claimant` holds it afterwards, else None.
        Two claimants racing for a free lease: exactly one gets it."""

    @abstractmethod
    def release(self, name: str, holder: str, term: int) -> None:
        """Expire our own lease now (if still ours at `term`), so a standby can take
        over without waiting for the TTL."""

    @abstractmethod
    def status(self, name: str) -> Lease | None:
        """The lease row as stored (possibly expired), or None if never taken."""


class Workers(ABC):
    """Worker heartbeats: operational state, one row per worker process start."""

    @abstractmethod
    def beat(self, beat: WorkerBeat, ttl_ms: int) -> WorkerRow:
        """Record that the worker is alive until store time now + ttl_ms (creating
        its row, or renewing it)."""

    @abstractmethod
    def stop(self, worker_id: str) -> None:
        """Remove a worker's row when it stops gracefully (its jobs are released)."""

    @abstractmethod
    def live(self, now_ms: int) -> list[WorkerRow]:
        """Workers whose heartbeat has not expired by now_ms, oldest first."""

    @abstractmethod
    def in_namespaces(self, boot_id: str, namespaces: str) -> list[WorkerRow]:
        """Workers, expired or not, whose process identity names this boot id and
        these namespaces (so a process under them can look their pids up),
        oldest first; rows without an identity are never among them."""


class Listener(ABC):
    """A running subscription to enqueue notifications from other processes."""

    @abstractmethod
    def close(self) -> None:
        """Stop listening (waits for the listening thread)."""


class Reads(ABC):
    """The projections, each read on its own short read transaction.

    Ids a store could not hold (NUL, lone surrogates, over-long) are simply
    absent: no query is sent with text the database would reject.
    """

    @abstractmethod
    def schedule(self, schedule_id: str) -> ScheduleRow | None:
        """The schedule's row (deleted ones included), or None."""

    @abstractmethod
    def schedules_page(
        self, limit: int, cursor: str | None, search: str | None = None
    ) -> Page[ScheduleRow]:
        """Live (not deleted) schedules ordered by id, code point by code point (the
        same order on every backend); with `search`, only those whose id starts
        with it (case and all: a prefix, matched exactly). A page costs about
        `limit` rows whatever the number of schedules. A search no id could hold
        (too long, a NUL) matches nothing. ValidationError for a bad limit or a
        cursor this list did not return."""

    @abstractmethod
    def schedule_count(self, search: str | None = None) -> int:
        """How many live schedules `schedules_page` lists with this `search`:
        one count over its index's range, in one statement."""

    @abstractmethod
    def due_schedules(self, now_ms: int, limit: int) -> list[ScheduleRow]:
        """Live, unpaused schedules due by `now_ms`, oldest due first, at most `limit`:
        bounded however many schedules exist."""

    @abstractmethod
    def earliest_due_at(self) -> int | None:
        """When the next live, unpaused schedule is due, or None if there is none."""

    @abstractmethod
    def job(self, job_id: str) -> JobRow | None:
        """The job's row, or None."""

    @abstractmethod
    def enqueue_history(
        self, schedule_id: str, limit: int, cursor: str | None
    ) -> Page[EnqueueHistoryRow]:
        """The schedule's automatic attempts, newest first, the newest 100 only; it
        outlives the schedule. ValidationError for a bad limit or cursor."""

    @abstractmethod
    def jobs_page(self, where: JobFilter, limit: int, cursor: str | None) -> Page[JobRow]:
        """Jobs matching `where`, newest first (by creation, then id); bounded pages
        with an opaque cursor. ValidationError for a bad limit or cursor."""

    @abstractmethod
    def job_attempts(self, job_id: str, limit: int) -> list[JobAttemptRow]:
        """The job's ended attempts, newest first, at most `limit`."""

    @abstractmethod
    def quarantine_page(self, limit: int, cursor: str | None) -> Page[QuarantineRow]:
        """Quarantined fingerprints, newest first (then by fingerprint), each with
        why and when; ValidationError for a bad limit or cursor."""

    @abstractmethod
    def quarantine_entry(self, fingerprint: str) -> QuarantineRow | None:
        """The fingerprint's quarantine entry, or None when it is admissible."""

    @abstractmethod
    def earliest_claimable(self, queues: Collection[str], kinds: Collection[str]) -> int | None:
        """The earliest run_at_ms among pending jobs of these kinds on these queues
        (a job scheduled for later: when to look again), or None."""

    @abstractmethod
    def pending_kinds(self) -> dict[str, int]:
        """Pending jobs by kind (to warn of kinds no handler serves)."""

    # For metrics, read at scrape time: each one aggregate over an index.

    @abstractmethod
    def due_count(self, now_ms: int) -> int:
        """How many live, unpaused schedules are due by `now_ms` (the scheduler's
        backlog): a count over the due index's range, read in one statement."""

    @abstractmethod
    def job_counts(self) -> dict[tuple[str, str], int]:
        """Jobs by (queue, state), for every job the projection holds (finished
        ones until compaction removes them); pairs with no job are absent."""

    @abstractmethod
    def oldest_pending(self) -> dict[str, int]:
        """Per queue that has pending jobs, the earliest run_at_ms among them (a job
        that became due, or is to run, at that instant); queues with none are absent."""

    @abstractmethod
    def quarantined_count(self) -> int:
        """How many fingerprints are quarantined now."""

    @abstractmethod
    def undeclared_count(self) -> int:
        """How many live schedules are declared by no code any more (their group's
        runtime started without declaring them): each wants an operator."""


class Store(ABC):
    """Everything Headgate keeps, in one database."""

    clock: Clock
    """Store time: what lease expiry and recorded instants are measured in."""
    log: EventLog
    leases: Leases
    workers: Workers
    reads: Reads

    @abstractmethod
    def schema_revision(self) -> int:
        """The store's schema revision, read from it now, when it is this Headgate's.
        Raises StoreUnavailable when the store cannot be reached, SchemaBehind or
        SchemaTooNew when it is not (another build, or a restore, changed it
        since it was opened)."""

    @abstractmethod
    def listen(self, on_enqueued: Callable[[str], None]) -> Listener | None:
        """Call `on_enqueued(queue)` (on a thread of the store's) whenever another
        process commits a job to a queue; None where the backend cannot notify
        (workers then poll). Notifications may be lost while reconnecting:
        they only shorten a wait, and polling covers the rest."""

    @abstractmethod
    def compact(
        self,
        policy: CompactionPolicy | None = None,
        cancel: threading.Event | None = None,
        *,
        fence: Fence | None = None,
    ) -> CompactionReport:
        """Keep what each stream needs and delete the rest, in small transactions
        (so other writers wait for one of them at most); stops between them once
        `cancel` is set. A rebuild from the compacted log reproduces the live
        projections exactly.

        The runtime runs it as a duty of the scheduler lease, with that lease's
        `fence`: every one of its transactions checks the term as it opens, so a
        holder paused past its lease's expiry writes nothing more (LeaseLost, and
        the run stops; what committed before stays, and the next holder's run
        takes up the rest). Without a fence it is an operator's action
        (`Headgate.compact`, `ops.compact`): it runs whoever holds the lease."""

    @abstractmethod
    def close(self) -> None:
        """Refuse further writes (StoreClosed) and release the connections; a write
        in flight finishes first."""
