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
from headgate._forksafe import WriterLock, renew_in_forked_children
from headgate._store.sql.backends import Dialect, SqlBackend, backend_named
from headgate._store.sql.engine import shown_url, translated_errors
from headgate._store.sql.write_transactions import Closing, GroupTransaction, WriteSession

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
        self._write_lock = WriterLock()
        self._queue_lock = threading.Lock()
        self._queued = 0
        """Writers waiting for the write lock."""
        self._open: GroupTransaction | None = None
        """A transaction left open for them (group commit)."""
        self._closed = False
        renew_in_forked_children(self)

    def __repr__(self) -> str:
        return f"Database({shown_url(self.url)!r})"

    @property
    def closed(self) -> bool:
        return self._closed

    @contextlib.contextmanager
    def serialised_write(self, where: str) -> Iterator[Connection]:
        """A write transaction (BEGIN IMMEDIATE on SQLite) of its own, queued behind
        this process's other writers: the event log's, the leases' and the
        worker rows' alike. Never shared with the log's writers: a lease's row
        locked before the log head would invert the order every log writer
        locks in (the head first), and two processes could deadlock."""
        with self.write_session(where, alone=True) as session:
            yield session.connection

    @contextlib.contextmanager
    def write_session(
        self,
        where: str,
        opening: str | None = None,
        closing: Closing | None = None,
        *,
        alone: bool = False,
    ) -> Iterator[WriteSession]:
        """`serialised_write`, where the block may share its transaction with the
        writers queued before and after it (group commit: `write_transactions`),
        its own work inside a savepoint when it is not the first. It returns
        once the transaction has committed, and raises if the commit failed.

        `opening`, a constant statement, is run once per transaction (with the
        BEGIN where the backend's transactions are explicit) and its rows given
        in `WriteSession.opened`; `closing` closes the transaction. `alone`:
        the block gets a transaction of its own, committed when it ends (a
        rebuild's writes change what every writer's opening reads)."""
        with translated_errors(where), self._queued_for_the_lock():
            waiting_for: GroupTransaction | None = None
            try:
                transaction = self._transaction_for(where, opening, alone)
                try:
                    with transaction.writing(opening, closing) as session:
                        yield session
                except BaseException:
                    if not transaction.done.is_set():  # rolled back to its savepoint alone
                        with contextlib.suppress(Exception):  # its writers hear of a failure
                            self._hand_on(transaction, alone)
                    raise
                waiting_for = self._hand_on(transaction, alone)
            finally:
                if self._closed:  # close() gave up waiting for this write
                    self._commit_open()
                    self.write_engine.dispose()
        if waiting_for is not None:
            with translated_errors(where):
                waiting_for.outcome()

    @contextlib.contextmanager
    def _queued_for_the_lock(self) -> Iterator[None]:
        """The write lock, held for the block; counted in `_queued` while waited for."""
        with contextlib.ExitStack() as holding:
            with self._queue_lock:
                self._queued += 1
            try:
                holding.enter_context(self._write_lock.held())
            finally:
                with self._queue_lock:
                    self._queued -= 1
            yield

    def _transaction_for(self, where: str, opening: str | None, alone: bool) -> GroupTransaction:
        """The transaction left open for this writer, or a new one."""
        if self._closed:
            self._commit_open()
            raise StoreClosed(f"{where}: the store is closed (Headgate.close() was called)")
        if alone:
            self._commit_open()
        transaction, self._open = self._open, None
        if transaction is None:
            explicit = self.backend.connector.explicit_transactions
            transaction = GroupTransaction.begin(
                self.write_engine, explicit, opening, self.dialect.write_settings_ended
            )
        return transaction

    def _hand_on(self, transaction: GroupTransaction, alone: bool) -> GroupTransaction | None:
        """Leave the transaction open for the writers queued behind (returned: the
        writer waits for its commit), or commit it now (None: committed). A
        closing store holds none open: close() disposes of its connection."""
        with self._queue_lock:
            queued = self._queued
        if queued and not alone and not self._closed and transaction.hold_open():
            self._open = transaction
            return transaction
        transaction.commit()
        return None

    def _commit_open(self) -> None:
        """Commit the transaction left open for queued writers (its writers see a
        failure; the caller, not one of them, goes on)."""
        transaction, self._open = self._open, None
        if transaction is not None:
            with contextlib.suppress(Exception):
                transaction.commit()

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
        if self._write_lock.acquire(CLOSE_WAIT_S):
            try:
                self._commit_open()
                self.write_engine.dispose()
            finally:
                self._write_lock.release()

    def after_fork_in_child(self) -> None:
        """Never use the parent's connections (they stay open for it); the write
        lock (`WriterLock`, held for the fork) renews itself."""
        self.engine.dispose(close=False)
        self.write_engine.dispose(close=False)
        self._queue_lock = threading.Lock()
        self._queued = 0
        self._open = None  # the parent's, on the parent's connection
