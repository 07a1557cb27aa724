"""The SQL store: the port's one implementation, on SQLite or PostgreSQL."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Final

from sqlalchemy.engine import Connection

from headgate._clock import Clock, StoreClock
from headgate._errors import StoreClosed
from headgate._forksafe import quiesce_for_forks, renew_in_forked_children
from headgate._projections import ALL_PROJECTIONS, AnyProjection
from headgate._store.port import CompactionPolicy, CompactionReport, Fence, Listener, Store
from headgate._store.sql import compaction
from headgate._store.sql.backends import backend_named, backend_of
from headgate._store.sql.engine import (
    BUSY_TIMEOUT_S,
    create_store_engine,
    parse_store_url,
    shown_url,
    translated_errors,
    write_transaction,
)
from headgate._store.sql.leases import SqlLeases
from headgate._store.sql.log import SqlEventLog
from headgate._store.sql.migrations import (
    migrate,
    require_current,
    require_existing,
    require_revision,
    schema_version,
)
from headgate._store.sql.projector import Projector
from headgate._store.sql.queries import SqlReads
from headgate._store.sql.schema import LIVE
from headgate._store.sql.worker_rows import SqlWorkers

CLOSE_WAIT_S: Final = 5.0
"""How long close() waits for a write in flight before leaving the write to close up."""


class SqlStore(Store):
    """The event log, its live projections and the leases in one SQL database.

    Opening it brings the schema up to date (migrations) and reads the
    store's clock. With `migrate_schema=False` (what only reads: `headgate
    events show`) it creates and migrates nothing, and refuses a URL that
    holds no store or one whose schema is behind. `projections` is for tests
    that need to observe folding (the live set is `ALL_PROJECTIONS`).
    """

    log: SqlEventLog
    leases: SqlLeases
    workers: SqlWorkers
    reads: SqlReads

    def __init__(
        self,
        url: str,
        clock: Clock,
        *,
        busy_timeout_s: float = BUSY_TIMEOUT_S,
        projections: Sequence[AnyProjection] = ALL_PROJECTIONS,
        migrate_schema: bool = True,
    ) -> None:
        self.clock = clock
        self._url = parse_store_url(url)
        if migrate_schema:
            backend_named(self._url.get_backend_name()).check_openable(self._url)
        else:
            require_current(self._url)
        self.engine = create_store_engine(url, busy_timeout_s)
        self.backend = backend_of(self.engine)
        # SQLite keeps a page cache per connection and drops it whenever another
        # connection has written. Every write of this process goes through one
        # connection (writes are serialised below anyway), so its cache stays
        # warm; reads use the pool. PostgreSQL caches in the server.
        self._write_engine = (
            create_store_engine(url, busy_timeout_s, single_connection=True)
            if self.backend.one_writer_connection
            else self.engine
        )
        self.projector = Projector(LIVE, projections)
        # Writers in this process queue here rather than in the database: only
        # one can write at a time anyway, and SQLite's busy handler would make
        # the losers sleep in coarse steps.
        self._write_lock = threading.Lock()
        self._writing_thread: int | None = None
        self._held_for_fork = False
        self._closed = False
        renew_in_forked_children(self)
        quiesce_for_forks(self)
        if migrate_schema:
            migrate(self.engine)
        with translated_errors("reading the store's clock"), self.engine.connect() as connection:
            self.synchronise_clock(connection)
        self.log = SqlEventLog(self)
        self.leases = SqlLeases(self)
        self.workers = SqlWorkers(self)
        self.reads = SqlReads(self.engine)

    def __repr__(self) -> str:
        return f"SqlStore({shown_url(self._url)!r})"

    def schema_revision(self) -> int:
        if self._closed:
            raise StoreClosed("reading the schema version: the store is closed")
        revision = schema_version(self.engine)
        require_revision(revision, shown_url(self._url))
        return revision

    def listen(self, on_enqueued: Callable[[str], None]) -> Listener | None:
        return self.backend.listen(self._url, on_enqueued)

    def compact(
        self,
        policy: CompactionPolicy | None = None,
        cancel: threading.Event | None = None,
        *,
        fence: Fence | None = None,
    ) -> CompactionReport:
        return compaction.compact(self, policy, cancel, fence=fence)

    def close(self) -> None:
        """A write in flight finishes first: on SQLite every write of the process
        shares one connection, and closing it under another thread's write
        crashed the interpreter. If that write is held up (a lock elsewhere),
        it closes the connection itself when it ends."""
        self._closed = True
        self.engine.dispose()
        if self._write_lock.acquire(timeout=CLOSE_WAIT_S):
            try:
                self._write_engine.dispose()
            finally:
                self._write_lock.release()

    def synchronise_clock(self, connection: Connection) -> None:
        """Read the store's clock into a StoreClock (any other clock is left alone):
        the server's clock, or for a local store this host's own."""
        if not isinstance(self.clock, StoreClock):
            return
        if self.backend.clock_is_local:
            self.clock.measure()
        else:
            self.clock.measure(lambda: self.backend.server_now_ms(connection))

    @contextlib.contextmanager
    def serialised_write(self, where: str) -> Iterator[Connection]:
        """A write transaction (BEGIN IMMEDIATE on SQLite), queued behind this
        process's other writers: the event log's and the leases' alike."""
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


def open_store(url: str, clock: Clock, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> SqlStore:
    return SqlStore(url, clock, busy_timeout_s=busy_timeout_s)


def open_existing_store(url: str, clock: Clock, *, read_only: bool) -> SqlStore:
    """The store at `url`, which must exist (StoreNotFound otherwise): for commands,
    where a mistyped URL must be an error, not a new empty store. `read_only`
    takes the schema as it is (SchemaBehind when it is behind); otherwise it is
    migrated, as by any process that writes."""
    if read_only:
        return SqlStore(url, clock, migrate_schema=False)
    require_existing(parse_store_url(url))
    return SqlStore(url, clock)
