"""Write transactions that carry several writers' work: group commit.

A process's writers take turns on one connection (`Database`). A commit is the
dearest part of a small write (SQLite's fsync, PostgreSQL's WAL flush and round
trip), so when a writer finishes while others are queued behind it, it leaves
the transaction open for them instead of committing: the next one runs in the
same transaction, inside a savepoint of its own, and whoever finishes with
nobody left queued (or once the group is full or old enough) commits for all.
Every writer in the group returns only after that commit, and each sees the
outcome: a writer whose own block failed is rolled back to its savepoint alone
and gets its own error at once; a failed commit fails every writer of the group.

Nothing here knows what a write does. A writer may name a constant statement to
open with (`opening`, run once per transaction, its rows given to every writer
that asked for it) and a function that closes the transaction
(`Closing`: it is handed the state writers left in `WriteSession.carried` and
returns SQL to send with the COMMIT, or runs what it needs itself and returns
None). The event log uses both: the log head is locked and read once, moved
once, and every queue enqueued on is notified once, for the whole group.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import Engine
from sqlalchemy.engine import Connection, RootTransaction

from headgate._store.sql.bulk import as_sqlalchemy_errors
from headgate._store.sql.engine import WRITE

MAX_WRITERS: Final = 64
"""Writers one transaction may carry before it is committed whatever is queued."""
MAX_HELD_OPEN_S: Final = 0.01
"""How long a transaction is held open for writers queued behind it, from the
first time it was: the most its first writer waits for others' blocks (one
block's own length aside)."""
_SAVEPOINT: Final = "headgate_writer"

Closing = Callable[[Connection, dict[str, Any]], str | None]
"""Closes a transaction: given the state its writers carried, SQL to send with
the COMMIT (None: nothing, or it ran what it needed itself)."""


@dataclass
class WriteSession:
    """What one writer's block is given.

    `connection`: the transaction's; `opened`: the rows of the writer's opening
    statement, as the transaction's first reader of it saw them; `carried`: state
    the transaction's writers hand on to each other and to its closing (a later
    writer sees what an earlier one left, unless the earlier one failed).
    """

    connection: Connection
    opened: Sequence[Sequence[Any]]
    carried: dict[str, Any]


@dataclass
class GroupTransaction:
    """One open write transaction and the writers it carries."""

    connection: Connection
    explicit: bool
    """BEGIN and COMMIT are sent by us, each with the statement beside it in one
    simple query (PostgreSQL's writer, in autocommit); else the driver's."""
    root: RootTransaction | None
    driver: Any
    """The driver's connection, held from the start: SQLAlchemy refuses to hand it
    out once a statement of its own found the connection dropped."""
    ended: Callable[[Connection], None] | None = None
    """Told when the transaction is over, committed or not (its settings end)."""
    held_open_at: float | None = None
    writers: int = 0
    opened: dict[str, Sequence[Sequence[Any]]] = field(default_factory=dict)
    carried: dict[str, Any] = field(default_factory=dict)
    closings: dict[int, Closing] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    @classmethod
    def begin(
        cls,
        engine: Engine,
        explicit: bool,
        opening: str | None,
        ended: Callable[[Connection], None] | None = None,
    ) -> GroupTransaction:
        connection = engine.execution_options(**WRITE).connect()
        driver: Any = None
        try:
            driver = connection.connection.driver_connection
            if not explicit:
                transaction = cls(connection, explicit, connection.begin(), driver, ended)
                if opening is not None:
                    transaction.opened[opening] = connection.exec_driver_sql(opening).all()
                return transaction
            transaction = cls(connection, explicit, None, driver, ended)
            begin = "BEGIN" if opening is None else f"BEGIN; {opening}"
            cursor = transaction._send(begin)
            if opening is not None:
                transaction.opened[opening] = _last_rows(cursor)
            return transaction
        except BaseException:
            _discard(connection, driver)
            raise

    @contextlib.contextmanager
    def writing(self, opening: str | None, closing: Closing | None) -> Iterator[WriteSession]:
        """One writer's block in it: inside a savepoint unless it is the first, so a
        failure undoes that writer's work (and what it carried) alone."""
        joined = self.writers > 0
        try:
            rows = self.open_with(opening)
            if joined:
                self._run(f"SAVEPOINT {_SAVEPOINT}")
        except BaseException as error:
            self.fail(error)
            raise
        if closing is not None:
            self.closings.setdefault(id(closing), closing)
        carried_before = dict(self.carried)
        try:
            yield WriteSession(self.connection, rows, self.carried)
        except BaseException as error:
            if not joined:  # nobody else's work is in it
                self.fail(error)
                raise
            try:
                self._run(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
            except BaseException as rollback_error:
                self.fail(rollback_error)
                raise
            self.carried.clear()
            self.carried.update(carried_before)
            raise
        if joined:
            try:
                self._run(f"RELEASE SAVEPOINT {_SAVEPOINT}")
            except BaseException as error:
                self.fail(error)
                raise
        self.writers += 1

    def hold_open(self) -> bool:
        """Whether it may stay open for a writer queued behind (it is not full, and
        has not been held open for long); if so, it is held from now on."""
        now = time.monotonic()
        if self.held_open_at is None:
            self.held_open_at = now
        return self.writers < MAX_WRITERS and now - self.held_open_at < MAX_HELD_OPEN_S

    def open_with(self, opening: str | None) -> Sequence[Sequence[Any]]:
        """The opening statement's rows, run now if no writer before ran it."""
        if opening is None:
            return []
        rows = self.opened.get(opening)
        if rows is None:
            if self.explicit:
                rows = _last_rows(self._send(opening))
            else:
                rows = self.connection.exec_driver_sql(opening).all()
            self.opened[opening] = rows
        return rows

    def commit(self) -> None:
        """Close it (every closing's SQL sent with the COMMIT), then let its writers go."""
        try:
            closing = [
                sql
                for close in self.closings.values()
                if (sql := close(self.connection, self.carried)) is not None
            ]
            if self.explicit:
                self._send("; ".join([*closing, "COMMIT"]))
            else:
                for sql in closing:
                    self.connection.exec_driver_sql(sql)
                assert self.root is not None
                self.root.commit()
        except BaseException as error:
            self.fail(error)
            raise
        try:
            self._end()
            with contextlib.suppress(Exception):
                self.connection.close()
        finally:
            self.done.set()

    def fail(self, error: BaseException) -> None:
        """Roll it back and tell every waiting writer it failed (whatever else fails
        meanwhile: a writer must never wait for a commit nobody will make)."""
        self.error = error
        try:
            with contextlib.suppress(Exception):
                if self.explicit:
                    if not self.driver.broken and not self.driver.closed:
                        self.driver.execute("ROLLBACK")
                elif self.root is not None:
                    self.root.rollback()
            self._end()
        finally:
            _discard(self.connection, self.driver)
            self.done.set()

    def _end(self) -> None:
        if self.ended is not None:
            with contextlib.suppress(Exception):
                self.ended(self.connection)

    def outcome(self) -> None:
        """Wait for the commit; raise what failed it (a copy: each writer raises its own)."""
        self.done.wait()
        if self.error is not None:
            raise copy.copy(self.error) from self.error

    def _run(self, statement: str) -> None:
        if self.explicit:
            self._send(statement)
        else:
            self.connection.exec_driver_sql(statement)

    def _send(self, statement: str) -> Any:
        with as_sqlalchemy_errors(self.connection, statement):
            return self.driver.execute(statement)


def _last_rows(cursor: Any) -> Sequence[Sequence[Any]]:
    """The rows of the last statement a simple query of several sent (an opening
    may be more than one statement: `log_order.SequenceOrder.opening`)."""
    while cursor.nextset():
        pass
    rows: Sequence[Sequence[Any]] = cursor.fetchall()
    return rows


def _discard(connection: Connection, driver: Any) -> None:
    """Give the connection back; a broken one is dropped, for a new one next time."""
    with contextlib.suppress(Exception):
        broken = getattr(driver, "broken", False) or getattr(driver, "closed", False)
        if broken or connection.invalidated:
            connection.invalidate()
    with contextlib.suppress(Exception):
        connection.close()
