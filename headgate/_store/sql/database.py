"""The database the SQL store's parts share: engines, the write lock, the store's
clock, and what a fork or a close does to them.

The event log, the leases, the worker rows and compaction each take this, not
the store that composes them, so none of them depends on the others or on
the store.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Final

from sqlalchemy import Engine
from sqlalchemy.engine import URL, Connection

from headgate._clock import Clock, StoreClock
from headgate._errors import StoreClosed
from headgate._forksafe import quiesce_for_forks, renew_in_forked_children
from headgate._store.sql.backends import Dialect, SqlBackend, backend_named
from headgate._store.sql.engine import shown_url, translated_errors, write_transaction

CLOSE_WAIT_S: Final = 5.0
"""How long close() waits for a write in flight before leaving the write to close up."""


class Database:
    """One store's database: a pool for reads, the connection writes go through,
    and the lock that queues this process's writers.

    Writers in this process queue on the lock rather than in the database:
    only one can write at a time anyway, and SQLite's busy handler would make
    the losers sleep in coarse steps.
    """

    def __init__(self, url: URL, clock: Clock, busy_timeout_s: float) -> None:
        self.url = url
        self.clock = clock
        self.backend: SqlBackend = backend_named(url.get_backend_name())
        self.dialect: Dialect = self.backend.dialect
        connector = self.backend.connector
        self.engine: Engine = connector.create_engine(url, busy_timeout_s)
        # Every write of this process goes through one connection (writes are
        # serialised below anyway); reads use the pool. On SQLite its page cache,
        # which a connection drops whenever another one has written, stays warm;
        # on PostgreSQL its statements stay prepared and its session probes
        # indexes (see the connectors).
        self.write_engine: Engine = (
            connector.create_engine(url, busy_timeout_s, single_connection=True)
            if connector.one_writer_connection
            else self.engine
        )
        self._write_lock = threading.Lock()
        self._writing_thread: int | None = None
        self._held_for_fork = False
        self._closed = False
        renew_in_forked_children(self)
        quiesce_for_forks(self)

    def __repr__(self) -> str:
        return f"Database({shown_url(self.url)!r})"

    @property
    def closed(self) -> bool:
        return self._closed

    @contextlib.contextmanager
    def serialised_write(self, where: str) -> Iterator[Connection]:
        """A write transaction (BEGIN IMMEDIATE on SQLite), queued behind this
        process's other writers: the event log's, the leases' and the worker
        rows' alike."""
        with self._write_lock:
            if self._closed:
                raise StoreClosed(f"{where}: the store is closed (Headgate.close() was called)")
            self._writing_thread = threading.get_ident()
            try:
                with write_transaction(self.write_engine, where) as connection:
                    yield connection
            finally:
                self._writing_thread = None
                if self._closed:  # close() gave up waiting for this write
                    self.write_engine.dispose()

    @contextlib.contextmanager
    def reading(self, where: str) -> Iterator[Connection]:
        """A connection from the read pool, its driver errors translated."""
        with translated_errors(where), self.engine.connect() as connection:
            yield connection

    def synchronise_clock(self, connection: Connection) -> None:
        """Read the store's clock into a StoreClock (any other clock is left alone):
        the server's clock, or for a local store this host's own."""
        if not isinstance(self.clock, StoreClock):
            return
        if self.dialect.clock_is_local:
            self.clock.measure()
        else:
            self.clock.measure(lambda: self.dialect.server_now_ms(connection))

    def close(self) -> None:
        """A write in flight finishes first: on SQLite every write of the process
        shares one connection, and closing it under another thread's write
        crashed the interpreter. If that write is held up (a lock elsewhere),
        it closes the connection itself when it ends."""
        self._closed = True
        self.engine.dispose()
        if self._write_lock.acquire(timeout=CLOSE_WAIT_S):
            try:
                self.write_engine.dispose()
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
        self.write_engine.dispose(close=False)
        self._write_lock = threading.Lock()
        self._writing_thread = None
