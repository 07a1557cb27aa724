"""The event log on SQL: atomic multi-stream appends with optimistic concurrency.

How appends are ordered and fenced is the backend's `backends.log_order.LogOrder`: on
SQLite every write holds the log head (positions gap-free in commit order);
on PostgreSQL a write holds only the streams it appends to and the facts it
decides on, and takes positions from a sequence, while readers that tail the
log stop at the safe head (docs/explanation/log-positions.md). Either way the
stream versions a write transaction reads for a stream it holds stay put
until it commits, which is how a batch checks every expected version up front
and appends the rest without per-event round trips. Projections are applied
inline, in the same transaction.
"""

from __future__ import annotations

import contextlib
from collections.abc import (
    Collection,
    Iterator,
)
from typing import Any, Final

from sqlalchemy import BigInteger, bindparam, func, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from headgate._clock import StoreClock
from headgate._domain.events import DomainEvent, RecordedEvent
from headgate._errors import (
    LeaseLost,
    ProjectionsRebuilding,
    ValidationError,
)
from headgate._store.mapper import type_name
from headgate._store.port import (
    EventLog,
    Fence,
)
from headgate._store.sql.database import Database
from headgate._store.sql.engine import translated_errors
from headgate._store.sql.event_rows import decode_row, events_between
from headgate._store.sql.log_transaction import CARRIED_HEAD, CARRIED_QUEUES, SqlWriteTransaction
from headgate._store.sql.projector import Projector
from headgate._store.sql.schema import POSITIONS, events, leases, log_head

_MOVE_HEAD: Final = (
    update(log_head)
    .where(log_head.c.id == 1)
    .values(position=bindparam("position", type_=BigInteger))
)


_LOCK_HEAD: Final = update(log_head).where(log_head.c.id == 1).values(position=log_head.c.position)
"""Locks the log head where a host's transaction may already have begun (on
SQLite, a deferred BEGIN: this first write takes the write lock)."""
_HEAD_NOW: Final = select(log_head.c.position, log_head.c.rebuilding).where(log_head.c.id == 1)


class SqlEventLog(EventLog):
    def __init__(self, database: Database, projector: Projector) -> None:
        self._database = database
        self._backend = database.backend
        self._dialect = database.dialect
        self._maintenance = database.backend.maintenance
        self._clock = database.clock
        self.projector = projector
        self._order = self._dialect.log_order(log_head.name, POSITIONS.name)
        self._identity: tuple[Any, ...] | None = None
        head = select(log_head.c.position, log_head.c.rebuilding, *self._dialect.write_settings())
        head = head.where(log_head.c.id == 1)
        if self._order.moves_head:
            head = self._dialect.locked(head)
        read = str(
            head.compile(dialect=database.engine.dialect, compile_kwargs={"literal_binds": True})
        )
        self._head_query = self._order.opening(read)
        """What opens every write: the log head (locked, where writes take turns on
        it) and whether a rebuild is under way, in constant statements (a lock
        returns the row as the last writer left it, a rebuild's too), which also
        make the transaction's settings (`Dialect.write_settings`), sent with
        the BEGIN where it can be."""

    @contextlib.contextmanager
    def write(
        self,
        fence: Fence | None = None,
        *,
        record_at_ms: int | None = None,
        while_rebuilding: bool = False,
    ) -> Iterator[SqlWriteTransaction]:
        with self._database.write_session(
            "writing to the store",
            self._head_query,
            self._close_transaction,
            # A held commit must be made at its instant, not with later writers; a
            # rebuild's writes change what the head statement reads.
            alone=record_at_ms is not None or while_rebuilding,
        ) as session:
            connection = session.connection
            ((head, rebuilding, *_),) = session.opened
            head = session.carried.get(CARRIED_HEAD, head)  # moved by earlier writers in it
            if while_rebuilding and not self._order.moves_head:
                self._order.exclude_writers(connection)
                head = self._order.safe_head(connection, head)
            self._dialect.write_settings_made(connection)
            if isinstance(self._clock, StoreClock) and self._clock.reading_due:
                self._database.synchronise_clock(connection)
            if rebuilding and not while_rebuilding:
                self._refuse_while_rebuilding(connection, head)
            self._maintenance.begin_write(connection, held=record_at_ms is not None)
            now = self._clock.now_ms()
            if record_at_ms is not None:
                now = max(now, record_at_ms)
            if fence is not None:
                self._check_fence(connection, fence, now)
            transaction = SqlWriteTransaction(
                connection,
                self._backend,
                self.projector,
                now,
                head,
                order=self._order,
                checks_on_job_rows=not while_rebuilding,
            )
            yield transaction
            transaction.hand_on(session.carried)

    @contextlib.contextmanager
    def write_within(self, host: object) -> Iterator[SqlWriteTransaction]:
        """A write in the host's own transaction (see `EventLog.write_within`): in a
        savepoint of it, so a failure here undoes only this write, and with the
        log head locked from its first statement until the host commits or rolls
        back. That statement comes before the savepoint: on SQLite it takes the
        write lock, and it makes Python's sqlite3 open the host's transaction if
        it has not yet (a SAVEPOINT outside one would be a transaction of its
        own, committed at its release). The host's
        connection keeps its own settings: the planner settings of the store's
        own writes (`Dialect.write_settings`) are not made on it."""
        connection = self._host_connection(host)
        with translated_errors("writing to the store in the host's transaction"):
            self._require_this_database(connection)
            connection.execute(self._order.entered(_LOCK_HEAD))  # before the savepoint
            if not self._dialect.commits_with_host(connection):
                raise ValidationError(
                    "connection",
                    "commits each statement on its own (autocommit): a job joins only a "
                    "transaction that commits as one",
                )
            savepoint = connection.begin_nested()
            try:
                head, rebuilding = connection.execute(_HEAD_NOW).one()
                if rebuilding:
                    self._refuse_while_rebuilding(connection, head)
                now = self._clock.now_ms()
                transaction = SqlWriteTransaction(
                    connection, self._backend, self.projector, now, head, order=self._order
                )
                yield transaction
                carried: dict[str, Any] = {}
                transaction.hand_on(carried)
                self._backend.connector.finish_write_now(
                    connection,
                    _MOVE_HEAD,
                    carried.get(CARRIED_HEAD),
                    carried.get(CARRIED_QUEUES, set()),
                )
            except BaseException:
                if savepoint.is_active:
                    savepoint.rollback()
                raise
            savepoint.commit()

    @staticmethod
    def _host_connection(host: object) -> Connection:
        if isinstance(host, Connection):
            connection = host
        elif isinstance(host, Session):
            connection = host.connection()
        else:
            raise ValidationError(
                "connection",
                "must be a SQLAlchemy Connection or Session (an AsyncConnection or "
                f"AsyncSession with the a-methods), got {type(host).__name__}",
            )
        if not connection.in_transaction():
            raise ValidationError(
                "connection", "must be in a transaction (begin one: the job commits with it)"
            )
        return connection

    def _require_this_database(self, connection: Connection) -> None:
        if connection.dialect.name != self._database.engine.dialect.name:
            raise ValidationError(
                "connection",
                f"is a {connection.dialect.name} connection; this store is "
                f"{self._database.engine.dialect.name}",
            )
        if self._identity is None:
            with self._database.reading("reading which database the store is") as own:
                self._identity = self._dialect.database_identity(own)
        if self._dialect.database_identity(connection) != self._identity:
            raise ValidationError(
                "connection",
                "is on another database (or schema) than this store: a job joins only a "
                "transaction on the store's own database",
            )

    def _close_transaction(self, connection: Connection, carried: dict[str, Any]) -> str | None:
        """The log head moved once for every writer the transaction carried, and the
        queues they enqueued on notified, in one statement (`Connector.finish_write`):
        returned to be sent with the COMMIT, or run now."""
        position: int | None = carried.get(CARRIED_HEAD)
        queues: set[str] = carried.get(CARRIED_QUEUES, set())
        if position is None and not queues:
            return None
        return self._backend.connector.finish_write(connection, _MOVE_HEAD, position, queues)

    def _refuse_while_rebuilding(self, connection: Connection, head: int) -> None:
        names = ", ".join(
            f"{name} at {position} of {head}"
            for name, position in self.projector.rebuilding(connection).items()
        )
        raise ProjectionsRebuilding(
            f"projections are being rebuilt ({names or 'starting'}); writes resume when "
            "`headgate projections rebuild` finishes"
        )

    def _check_fence(self, connection: Connection, fence: Fence, now_ms: int) -> None:
        query = self._dialect.locked(
            select(leases.c.term, leases.c.expires_at_ms).where(leases.c.name == fence.lease),
            shared=True,
        )
        row = connection.execute(query).first()
        if row is None or row.term != fence.term or row.expires_at_ms <= now_ms:
            raise LeaseLost(
                f"lease {fence.lease!r} is no longer held at term {fence.term}; write refused"
            )

    def checkpoint(self) -> None:
        with translated_errors("checkpointing the log"):
            self._maintenance.checkpoint(self._database.engine)

    def read_stream(self, stream_id: str) -> list[RecordedEvent]:
        query = select(events).where(events.c.stream_id == stream_id).order_by(events.c.version)
        with self._database.reading("reading a stream") as connection:
            return [decode_row(row) for row in connection.execute(query)]

    def read_stream_back(
        self,
        stream_id: str,
        *,
        until_ms: int | None = None,
        before_version: int | None = None,
        types: Collection[type[DomainEvent]] | None = None,
        limit: int = 100,
    ) -> list[RecordedEvent]:
        query = select(events).where(events.c.stream_id == stream_id)
        if until_ms is not None:
            query = query.where(events.c.recorded_at_ms <= until_ms)
        if before_version is not None:
            query = query.where(events.c.version < before_version)
        if types is not None:
            query = query.where(events.c.type.in_(sorted(type_name(t) for t in types)))
        query = query.order_by(events.c.version.desc()).limit(max(limit, 0))
        with self._database.reading("reading a stream back") as connection:
            return [decode_row(row) for row in connection.execute(query)]

    def oldest_kept(self, stream_id: str) -> RecordedEvent | None:
        query = (
            select(events)
            .where(events.c.stream_id == stream_id)
            .order_by(events.c.version)
            .limit(1)
        )
        with self._database.reading("reading a stream's oldest event") as connection:
            row = connection.execute(query).first()
        return None if row is None else decode_row(row)

    def read_all(
        self, after_position: int = 0, limit: int = 1000, until_position: int | None = None
    ) -> list[RecordedEvent]:
        with self._database.reading("reading the log") as connection:
            if not self._order.moves_head:  # never past a position still in flight
                safe = self._safe_head(connection)
                until_position = safe if until_position is None else min(until_position, safe)
            query = events_between(after_position, until_position, limit)
            return [decode_row(row) for row in connection.execute(query)]

    def head(self) -> int:
        with self._database.reading("reading the log head") as connection:
            return self._safe_head(connection)

    def _safe_head(self, connection: Connection) -> int:
        kept = int(
            connection.execute(select(log_head.c.position).where(log_head.c.id == 1)).scalar_one()
        )
        return self._order.safe_head(connection, kept)

    def stream_version(self, stream_id: str) -> int:
        query = select(func.max(events.c.version)).where(events.c.stream_id == stream_id)
        with self._database.reading("reading a stream version") as connection:
            return int(connection.execute(query).scalar() or 0)
