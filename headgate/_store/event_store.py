"""The event log: atomic multi-stream appends with optimistic concurrency.

Appends are serialised by locking the single `log_head` row (SQLite's write
lock does the same), so positions are assigned gap-free in commit order and a
reader tailing by position can never skip an event that commits later with a
lower position. Holding that lock also makes the stream versions read inside a
write transaction stable until commit, which is how a batch checks every
expected version up front and appends the rest without per-event round trips.

Projections are applied inline, in the same transaction as the events.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import Select, func, select, text, true, update
from sqlalchemy.engine import Connection

from headgate._clock import Clock, StoreClock
from headgate._domain.events import DomainEvent, RecordedEvent
from headgate._errors import ConcurrencyConflict, LeaseLost, ProjectionsRebuilding, StoreClosed
from headgate._forksafe import quiesce_for_forks, renew_in_forked_children
from headgate._projections import ALL_PROJECTIONS
from headgate._store.bulk import bulk_insert
from headgate._store.engine import (
    BUSY_TIMEOUT_S,
    create_store_engine,
    is_postgresql,
    translated_errors,
    write_transaction,
)
from headgate._store.event_rows import decode_row, event_row, events_between
from headgate._store.migrations import migrate
from headgate._store.projector import CHUNK, Projector
from headgate._store.schema import LIVE, events, leases, log_head
from headgate._store.sql import each_of, is_one_of

NO_STREAM: Final = 0
"""Expected version of a stream that must not exist yet."""
ANY_VERSION: Final = -1
"""Expected version that accepts any current version."""
MAX_STREAM_ID_LENGTH: Final = 255


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


class InstantNotReached(Exception):
    """A write held for an instant was abandoned before it: nothing was committed.

    Raised when the runtime stops while the write waits, or when the clock
    does not reach the instant within the real time it should take (a fake
    clock that a test is not advancing, a clock stepped backwards).
    """


CLOSE_WAIT_S: Final = 5.0
"""How long close() waits for a write in flight before leaving the write to close up."""
INSTANT_GRACE_S: Final = 0.1
"""Real time a hold may overrun the clock's own distance to its instant."""


def wait_for_instant(clock: Clock, instant_ms: int, cancel: threading.Event) -> bool:
    """Wait until `clock` reaches `instant_ms`; False if cancelled before it, or if
    the clock does not get there.

    The wait is capped in real time at the distance the clock showed plus a
    grace, so a clock that stops moving cannot hold a caller (or a write lock)
    forever.
    """
    remaining_ms = instant_ms - clock.now_ms()
    give_up = time.monotonic() + max(remaining_ms, 0) / 1000 + INSTANT_GRACE_S
    while remaining_ms > 0:
        left_s = give_up - time.monotonic()
        if cancel.is_set() or left_s <= 0:
            return False
        cancel.wait(min(remaining_ms / 1000, left_s))
        remaining_ms = instant_ms - clock.now_ms()
    return True


@dataclass(frozen=True)
class Fence:
    """A write made under a lease: valid only while the lease is at this term."""

    lease: str
    term: int


class WriteTransaction:
    """One serialised write transaction: read what a decision needs, then append."""

    def __init__(self, connection: Connection, projector: Projector, now_ms: int, head: int):
        self.connection = connection
        self.now_ms = now_ms
        self._projector = projector
        self._head = head
        self._versions: dict[str, int] = {}
        """Stream versions already learned in this transaction (stable: we hold the lock)."""

    @property
    def head(self) -> int:
        return self._head

    def stream_versions(self, stream_ids: Iterable[str]) -> dict[str, int]:
        """Current version of each stream; 0 for a stream that does not exist."""
        known = self._versions
        versions: dict[str, int] = {}
        wanted: list[str] = []
        for stream_id in dict.fromkeys(stream_ids):
            if stream_id in known:
                versions[stream_id] = known[stream_id]
            else:
                versions[stream_id] = 0
                wanted.append(stream_id)
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            versions.update(
                {
                    stream: int(version)
                    for stream, version in self.connection.execute(self._latest_versions(chunk))
                    if version is not None
                }
            )
        return versions

    def _latest_versions(self, stream_ids: list[str]) -> Select[Any]:
        """(stream id, its latest version or None), per id."""
        wanted = each_of(self.connection, stream_ids, events.c.stream_id)
        latest = select(func.max(events.c.version)).where(events.c.stream_id == wanted.c.value)
        return select(wanted.c.value, latest.scalar_subquery())

    def first_events(self, stream_ids: Iterable[str]) -> dict[str, DomainEvent]:
        """The first event of each stream that exists.

        Only for streams compaction never trims from the front (jobs, manual
        runs): their missing version 1 means a missing stream, which is
        remembered as version 0 for the appends that follow in this transaction.
        """
        wanted = list(dict.fromkeys(stream_ids))
        found: dict[str, DomainEvent] = {}
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            for row in self.connection.execute(self._first_of(chunk)):
                found[row.stream_id] = decode_row(row).event
        # A stream without a first event does not exist: its version is known.
        self._versions.update((stream_id, 0) for stream_id in wanted if stream_id not in found)
        return found

    def _first_of(self, stream_ids: list[str]) -> Select[Any]:
        if not is_postgresql(self.connection.engine):
            return select(events).where(
                is_one_of(self.connection, events.c.stream_id, stream_ids), events.c.version == 1
            )
        wanted = each_of(self.connection, stream_ids, events.c.stream_id)
        # LIMIT 1 (there is at most one row anyway) keeps the planner from
        # flattening the LATERAL into a join, which it then ran as a hash join
        # over every stream's first event while its statistics lagged the log.
        first = (
            select(events)
            .where(events.c.stream_id == wanted.c.value, events.c.version == 1)
            .limit(1)
            .lateral("first")
        )
        return select(first).select_from(wanted.join(first, true()))

    def append_units(self, units: Sequence[Unit]) -> list[UnitResult]:
        """Append each unit whose expected versions hold; report a conflict for the rest.

        One unit's conflict never fails its neighbours.
        """
        versions = self.stream_versions(a.stream_id for unit in units for a in unit)
        head_before = self._head
        rows: list[dict[str, object]] = []
        recorded: list[RecordedEvent] = []
        results: list[UnitResult] = []
        for unit in units:
            conflict = _first_conflict(unit, versions)
            if conflict is not None:
                results.append(conflict)
                continue
            unit_recorded: list[RecordedEvent] = []
            for stream_append in unit:
                for event in stream_append.events:
                    self._head += 1
                    versions[stream_append.stream_id] += 1
                    entry = RecordedEvent(
                        self._head,
                        stream_append.stream_id,
                        versions[stream_append.stream_id],
                        self.now_ms,
                        event,
                    )
                    unit_recorded.append(entry)
                    rows.append(event_row(entry))
            recorded.extend(unit_recorded)
            results.append(unit_recorded)
        self._versions.update(versions)
        if rows:
            bulk_insert(self.connection, events, rows)
            self.connection.execute(
                update(log_head).where(log_head.c.id == 1).values(position=self._head)
            )
            self._projector.apply_live(self.connection, recorded, head_before)
        return results


def _first_conflict(unit: Unit, versions: dict[str, int]) -> ConcurrencyConflict | None:
    for stream_append in unit:
        actual = versions[stream_append.stream_id]
        expected = stream_append.expected_version
        if expected not in (ANY_VERSION, actual):
            return ConcurrencyConflict(stream_append.stream_id, expected, actual)
    return None


_SERVER_NOW_MS: Final = text("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint")


class EventStore:
    """The event log and its live projections in one SQL database."""

    def __init__(self, url: str, clock: Clock, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.url = url
        self.clock = clock
        self.engine = create_store_engine(url, busy_timeout_s)
        # SQLite keeps a page cache per connection and drops it whenever another
        # connection has written. Every write of this process goes through one
        # connection (writes are serialised below anyway), so its cache stays
        # warm; reads use the pool. PostgreSQL caches in the server.
        self._write_engine = (
            self.engine
            if is_postgresql(self.engine)
            else create_store_engine(url, busy_timeout_s, single_connection=True)
        )
        self.projector = Projector(LIVE, ALL_PROJECTIONS)
        # Writers in this process queue here rather than in the database: only
        # one can write at a time anyway, and SQLite's busy handler would make
        # the losers sleep in coarse steps.
        self._write_lock = threading.Lock()
        self._writing_thread: int | None = None
        self._held_for_fork = False
        self._closed = False
        renew_in_forked_children(self)
        quiesce_for_forks(self)
        migrate(self.engine, clock.now_ms())
        with translated_errors("reading the store's clock"), self.engine.connect() as connection:
            self.synchronise_clock(connection)

    def close(self) -> None:
        """Refuse further writes and release the connections.

        A write in flight finishes first: on SQLite every write of the process
        shares one connection, and closing it under another thread's write
        crashed the interpreter. If that write is held up (a lock elsewhere),
        it closes the connection itself when it ends.
        """
        self._closed = True
        self.engine.dispose()
        if self._write_lock.acquire(timeout=CLOSE_WAIT_S):
            try:
                self._write_engine.dispose()
            finally:
                self._write_lock.release()

    def before_fork(self) -> None:
        # A thread forking from inside its own write cannot wait for itself; its
        # child, like any child, gets fresh connections and a free lock anyway.
        self._held_for_fork = self._writing_thread != threading.get_ident()
        if self._held_for_fork:
            self._write_lock.acquire()

    def after_fork_in_parent(self) -> None:
        if self._held_for_fork:
            self._write_lock.release()

    def after_fork_in_child(self) -> None:
        """Never use the parent's connections (they stay open for it); the write
        lock, held for the fork, is the child's own and free."""
        self.engine.dispose(close=False)
        self._write_engine.dispose(close=False)
        self._write_lock = threading.Lock()
        self._writing_thread = None

    @property
    def is_postgresql(self) -> bool:
        return is_postgresql(self.engine)

    def synchronise_clock(self, connection: Connection) -> None:
        """Read the store's clock into a StoreClock (any other clock is left alone):
        PostgreSQL's server clock, or for SQLite this host's own."""
        if not isinstance(self.clock, StoreClock):
            return
        if self.is_postgresql:
            self.clock.measure(lambda: int(connection.execute(_SERVER_NOW_MS).scalar_one()))
        else:
            self.clock.measure()

    @contextlib.contextmanager
    def operational_write(self, where: str) -> Iterator[Connection]:
        """A write transaction on operational state (leases), queued behind this
        process's other writers like every write."""
        with self._write_lock:
            if self._closed:
                raise StoreClosed(f"{where}: the store is closed (Headgate.close() was called)")
            self._writing_thread = threading.get_ident()
            try:
                with write_transaction(self._write_engine, where) as connection:
                    yield connection
            finally:
                self._writing_thread = None
                if self._closed:  # close() gave up waiting for this write
                    self._write_engine.dispose()

    @contextlib.contextmanager
    def write(
        self,
        fence: Fence | None = None,
        *,
        while_rebuilding: bool = False,
        not_before_ms: int | None = None,
        cancel: threading.Event | None = None,
    ) -> Iterator[WriteTransaction]:
        """A serialised write transaction; commits when the block exits cleanly.

        Raises ProjectionsRebuilding while any projection lags the log: decisions
        read projections, and a half-rebuilt table would mislead them. Only the
        maintenance commands pass `while_rebuilding`.

        With `not_before_ms`, the events are recorded at that instant (or now,
        if later) and the commit waits for the clock to reach it; if the wait
        is abandoned (`cancel`, or a clock that does not get there), the
        transaction rolls back with InstantNotReached.
        """
        with self.operational_write("writing to the store") as connection:
            head_query = select(log_head.c.position).where(log_head.c.id == 1)
            if self.is_postgresql:
                head_query = head_query.with_for_update()
            head = int(connection.execute(head_query).scalar_one())
            if isinstance(self.clock, StoreClock) and self.clock.reading_due:
                self.synchronise_clock(connection)
            if not while_rebuilding:
                lagging = self.projector.lagging(connection, head)
                if lagging:
                    names = ", ".join(
                        f"{name} at {position} of {head}" for name, position in lagging.items()
                    )
                    raise ProjectionsRebuilding(
                        f"projections are being rebuilt ({names}); writes resume when "
                        "`headgate projections rebuild` finishes"
                    )
            if not self.is_postgresql:
                # SQLite checkpoints the WAL inside the commit that grows it past
                # 1,000 pages; a commit held for an instant must not pay for
                # that (its caller runs checkpoint() afterwards instead).
                connection.exec_driver_sql(
                    f"PRAGMA wal_autocheckpoint={0 if not_before_ms is not None else 1000}"
                )
            now = self.clock.now_ms()
            if not_before_ms is not None:
                now = max(now, not_before_ms)
            if fence is not None:
                self._check_fence(connection, fence, now)
            yield WriteTransaction(connection, self.projector, now, head)
            if not_before_ms is not None and not wait_for_instant(
                self.clock, not_before_ms, cancel or threading.Event()
            ):
                raise InstantNotReached

    def checkpoint(self) -> None:
        """Copy SQLite's write-ahead log into the database without blocking anyone
        (PASSIVE); a no-op on PostgreSQL."""
        if self.is_postgresql:
            return
        with translated_errors("checkpointing the log"), self.engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")

    def _check_fence(self, connection: Connection, fence: Fence, now_ms: int) -> None:
        query = select(leases.c.term, leases.c.expires_at_ms).where(leases.c.name == fence.lease)
        if self.is_postgresql:
            query = query.with_for_update(read=True)
        row = connection.execute(query).first()
        if row is None or row.term != fence.term or row.expires_at_ms <= now_ms:
            raise LeaseLost(
                f"lease {fence.lease!r} is no longer held at term {fence.term}; write refused"
            )

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

    def read_stream(self, stream_id: str) -> list[RecordedEvent]:
        query = select(events).where(events.c.stream_id == stream_id).order_by(events.c.version)
        with translated_errors("reading a stream"), self.engine.connect() as connection:
            return [decode_row(row) for row in connection.execute(query)]

    def read_all(
        self, after_position: int = 0, limit: int = 1000, until_position: int | None = None
    ) -> list[RecordedEvent]:
        """Events with position > after_position (and <= until_position), in order."""
        query = events_between(after_position, until_position, limit)
        with translated_errors("reading the log"), self.engine.connect() as connection:
            return [decode_row(row) for row in connection.execute(query)]

    def head(self) -> int:
        """The last assigned position (0 for an empty log)."""
        query = select(log_head.c.position).where(log_head.c.id == 1)
        with translated_errors("reading the log head"), self.engine.connect() as connection:
            return int(connection.execute(query).scalar_one())

    def stream_version(self, stream_id: str) -> int:
        query = select(func.max(events.c.version)).where(events.c.stream_id == stream_id)
        with translated_errors("reading a stream version"), self.engine.connect() as connection:
            return int(connection.execute(query).scalar() or 0)
