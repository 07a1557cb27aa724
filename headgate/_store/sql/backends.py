"""What differs between SQLite and PostgreSQL, decided here and nowhere else.

One strategy object per backend (`SQLITE`, `POSTGRESQL`), found for any
engine or connection with `backend_of`. Every other module of the adapter
writes its SQL once, in SQLAlchemy Core, and asks the backend for the few
things that must differ: engine settings, how a batch of keys is passed and
looked up, bulk writes, row locks, the server's clock, checkpoints and
vacuum, the migration lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Final
from urllib.request import pathname2url

from sqlalchemy import (
    ColumnElement,
    Engine,
    Select,
    String,
    Table,
    Text,
    any_,
    create_engine,
    event,
    func,
    insert,
    literal,
    select,
    text,
    true,
    update,
)
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.pool import NullPool, StaticPool
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.sql.selectable import TableValuedAlias
from sqlalchemy.types import TypeEngine

from headgate._errors import StoreUnopenable, ValidationError
from headgate._store.port import Listener
from headgate._store.sql import bulk

__all__ = [
    "POSTGRESQL",
    "SQLITE",
    "SqlBackend",
    "backend_named",
    "backend_of",
    "checked_store_url",
    "code_point_order",
]


class SqlBackend(ABC):
    """The operations whose SQL or settings differ by database."""

    name: str
    one_writer_connection: bool
    """Every write of a process shares one connection (SQLite: its page cache,
    dropped whenever another connection writes, stays warm)."""
    clock_is_local: bool
    """The store's clock is this host's (SQLite); else the server's is read."""
    renames_constraints: bool
    """ALTER can rename a table's indexes and constraints (else a table must be
    made anew to change their names)."""
    writes_begin_locked: bool
    """A write transaction holds the store's write lock from its first statement
    (SQLite's BEGIN IMMEDIATE). Else the lock is the log head row's, and what
    must be read as of after it (a rebuild that committed while this writer
    waited) is read in a later statement: PostgreSQL's READ COMMITTED reads the
    other tables of a statement that waited for a row lock as of its start."""

    @abstractmethod
    def checked_url(self, url: URL) -> URL:
        """The store URL as this backend takes it (its drivername one SQLAlchemy
        knows); ValueError naming what is wrong."""

    @abstractmethod
    def is_missing(self, url: URL) -> bool:
        """True when the URL names no store that exists yet (and opening it would make
        one); False when it may exist (a server says so only once connected to);
        StoreUnopenable when it names a place no store can be at (a directory)."""

    @abstractmethod
    def check_openable(self, url: URL) -> None:
        """StoreUnopenable naming the place, when the URL names one where no store
        can be opened; nothing when it may be (a server says so only when
        connected to)."""

    @abstractmethod
    def create_engine(
        self, url: URL, busy_timeout_s: float, *, single_connection: bool = False
    ) -> Engine:
        """An engine with Headgate's session settings."""

    @abstractmethod
    def inspecting_engine(self, url: URL) -> Engine:
        """An engine whose connections only read and change nothing on connecting
        (none of Headgate's session settings): for finding out what a URL holds
        before opening it as a store."""

    @abstractmethod
    def is_one_of(self, column: ColumnElement[Any], values: Sequence[Any]) -> ColumnElement[bool]:
        """`column IN (values)`, for strings or integers, with one parameter however
        many values: the statement text is the same for every batch and nothing
        is rendered per value in Python."""

    @abstractmethod
    def each_of(self, values: Sequence[Any], like: ColumnElement[Any]) -> TableValuedAlias:
        """The values as the rows of a one-column table, `wanted.value`, for looking
        each value up on its own (in a correlated or LATERAL subquery): a lookup
        per value is planned as an index probe whatever the statistics say."""

    @abstractmethod
    def probing_indexes(self, connection: Connection) -> AbstractContextManager[None]:
        """Statements inside find their rows by index probes (see PostgreSQL's)."""

    @abstractmethod
    def bulk_insert(
        self, connection: Connection, table: Table, rows: Sequence[dict[str, Any]]
    ) -> None:
        """INSERT every row (all rows have the same keys), in the connection's transaction."""

    @abstractmethod
    def bulk_update(
        self, connection: Connection, table: Table, key_column: str, rows: Sequence[dict[str, Any]]
    ) -> None:
        """UPDATE rows by key; each row holds the key and the columns to set."""

    @abstractmethod
    def locked(self, query: Select[Any], *, shared: bool = False) -> Select[Any]:
        """`query`, locking the rows it reads until the transaction ends."""

    @abstractmethod
    def first_of_each(self, table: Table, stream_ids: Sequence[str]) -> Select[Any]:
        """Rows of `table` (the events) at version 1 of each of these streams."""

    @abstractmethod
    def insert_if_absent(self, table: Table, key: str) -> Insert:
        """INSERT ... ON CONFLICT (key) DO NOTHING: two writers inserting at once is no error."""

    @abstractmethod
    def server_now_ms(self, connection: Connection) -> int:
        """The store's clock in epoch ms (only asked when not `clock_is_local`)."""

    @abstractmethod
    def begin_write(self, connection: Connection, *, held: bool) -> None:
        """Settings for one write transaction; `held` commits at an instant."""

    @abstractmethod
    def checkpoint(self, engine: Engine) -> None:
        """Fold a write-ahead log into the database without blocking anyone."""

    @abstractmethod
    def rename_tables(
        self,
        connection: Connection,
        tables: Mapping[str, str],
        indexes: Mapping[str, str],
        checks: Mapping[str, tuple[str, str]],
    ) -> None:
        """Rename tables (with their primary keys), indexes (unique constraints
        included) and check constraints (old name -> (table's new name, new name))
        in place; only where `renames_constraints`."""

    @abstractmethod
    def reclaim_space(self, engine: Engine, tables: Sequence[Table]) -> None:
        """Make the space of deleted and updated rows reusable now (after compaction)."""

    @abstractmethod
    def lock_for_migration(self, connection: Connection) -> None:
        """Serialise concurrent schema upgrades beyond what the write transaction does."""

    @abstractmethod
    def is_stream_version_conflict(self, detail: str) -> bool:
        """Whether a unique-violation message is two appends of one stream version."""

    @abstractmethod
    def is_tick_origin_conflict(self, detail: str) -> bool:
        """Whether a unique-violation message is a second job for one (schedule, tick)."""

    @abstractmethod
    def notify_enqueued(self, connection: Connection, queues: Collection[str]) -> None:
        """Tell listening processes, when this transaction commits, that jobs were
        enqueued on these queues (nothing where the backend cannot)."""

    @abstractmethod
    def listen(self, url: URL, on_enqueued: Callable[[str], None]) -> Listener | None:
        """A listener calling `on_enqueued(queue)` for notifications from other
        processes; None where the backend has none."""


ENQUEUED_CHANNEL: Final = "headgate_enqueued"
_PAYLOAD_SEPARATOR: Final = "\n"


class _Sqlite(SqlBackend):
    """SQLite (`sqlite:///path.db`), the embedded default.

    WAL so readers never block the writer, a busy timeout so writers queue
    instead of failing, and `synchronous=FULL` so an acknowledged commit
    survives a power cut. Write transactions start with BEGIN IMMEDIATE,
    taking the write lock up front, so a read-then-write transaction can never
    be overtaken.
    """

    name = "sqlite"
    one_writer_connection = True
    clock_is_local = True
    renames_constraints = False
    writes_begin_locked = True
    PAGE_SIZE: Final = 16_384

    def checked_url(self, url: URL) -> URL:
        if url.drivername not in ("sqlite", "sqlite+pysqlite"):
            raise ValidationError(
                "store URL",
                f"driver {url.get_driver_name()!r} is not supported; use sqlite:///path.db",
            )
        if not url.database or url.database == ":memory:":
            raise ValidationError(
                "store URL", "an in-memory SQLite database cannot be shared; use sqlite:///path.db"
            )
        if url.query:
            raise ValidationError(
                "store URL",
                f"SQLite takes no options here ({', '.join(url.query)}); Headgate sets its own",
            )
        return url

    def is_missing(self, url: URL) -> bool:
        path = Path(str(url.database))
        try:
            if path.is_dir():
                raise _unopenable(path, "it is a directory")
            return not path.exists()
        except OSError as error:  # a name too long, a loop of links: no file can be there
            raise _unopenable(path, error.strerror or str(error)) from None

    def check_openable(self, url: URL) -> None:
        path = Path(str(url.database))
        try:
            reason = _why_sqlite_cannot_open(path)
        except OSError as error:
            reason = error.strerror or str(error)
        if reason is not None:
            raise _unopenable(path, reason)

    def inspecting_engine(self, url: URL) -> Engine:
        """Opened read-only (SQLite's `mode=ro`): it never creates the file."""
        read_only = url.set(
            database=f"file:{pathname2url(str(url.database))}",
            query={"mode": "ro", "uri": "true"},
        )
        return create_engine(read_only, poolclass=NullPool)

    def create_engine(
        self, url: URL, busy_timeout_s: float, *, single_connection: bool = False
    ) -> Engine:
        engine = create_engine(
            url,
            connect_args={"timeout": busy_timeout_s, "check_same_thread": False},
            **({"poolclass": StaticPool} if single_connection else {}),
        )
        page_size = self.PAGE_SIZE

        @event.listens_for(engine, "connect")
        def _configure(dbapi_connection: Any, _record: Any) -> None:
            # Take transaction control away from the sqlite3 module; see "begin".
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            # Only a new, empty database takes a page size (and only before WAL
            # mode is set); an existing one keeps its own (README: how to convert
            # one). With 16 KiB pages a batch of ticks dirties fewer pages:
            # measured on a store with long histories, about a fifth less time
            # per tick than 4 KiB.
            cursor.execute(f"PRAGMA page_size={page_size}")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(connection: Connection) -> None:
            if connection.get_execution_options().get("headgate_write"):
                connection.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                connection.exec_driver_sql("BEGIN")

        return engine

    def is_one_of(self, column: ColumnElement[Any], values: Sequence[Any]) -> ColumnElement[bool]:
        # The values as one JSON array, unpacked by json_each (an IN list is
        # rendered anew, placeholder by placeholder, for every length).
        # json_each cuts a string at a NUL: fine for what is looked up this way
        # (ids, keys, fingerprints), which the store never holds with one.
        each = func.json_each(literal(json.dumps(list(values)))).table_valued("value")
        return column.in_(select(each.c.value))

    def each_of(self, values: Sequence[Any], like: ColumnElement[Any]) -> TableValuedAlias:
        return (
            func.json_each(literal(json.dumps(list(values)))).table_valued("value").alias("wanted")
        )

    @contextlib.contextmanager
    def probing_indexes(self, connection: Connection) -> Iterator[None]:
        yield  # SQLite plans by index whenever one serves

    def bulk_insert(
        self, connection: Connection, table: Table, rows: Sequence[dict[str, Any]]
    ) -> None:
        bulk.executemany_insert(connection, table, rows)

    def bulk_update(
        self, connection: Connection, table: Table, key_column: str, rows: Sequence[dict[str, Any]]
    ) -> None:
        bulk.executemany_update(connection, table, key_column, rows)

    def locked(self, query: Select[Any], *, shared: bool = False) -> Select[Any]:
        return query  # the write transaction (BEGIN IMMEDIATE) already excludes writers

    def first_of_each(self, table: Table, stream_ids: Sequence[str]) -> Select[Any]:
        return select(table).where(
            self.is_one_of(table.c.stream_id, stream_ids), table.c.version == 1
        )

    def insert_if_absent(self, table: Table, key: str) -> Insert:
        return sqlite_dialect.insert(table).on_conflict_do_nothing(index_elements=[key])

    def begin_write(self, connection: Connection, *, held: bool) -> None:
        # SQLite checkpoints the WAL inside the commit that grows it past 1,000
        # pages; a commit held for an instant must not pay for that (its
        # caller runs checkpoint() afterwards instead).
        pages = 0 if held else 1000
        if connection.info.get("wal_autocheckpoint") != pages:  # a setting of the connection
            connection.exec_driver_sql(f"PRAGMA wal_autocheckpoint={pages}")
            connection.info["wal_autocheckpoint"] = pages

    def server_now_ms(self, connection: Connection) -> int:
        raise NotImplementedError("a SQLite store's clock is this host's")

    def checkpoint(self, engine: Engine) -> None:
        with engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")

    def rename_tables(
        self,
        connection: Connection,
        tables: Mapping[str, str],
        indexes: Mapping[str, str],
        checks: Mapping[str, tuple[str, str]],
    ) -> None:
        raise NotImplementedError("SQLite cannot rename a table's inline constraints")

    def reclaim_space(self, engine: Engine, tables: Sequence[Table]) -> None:
        pass  # SQLite reuses freed pages by itself (VACUUM would rewrite the file)

    def lock_for_migration(self, connection: Connection) -> None:
        pass  # the migration's write transaction (BEGIN IMMEDIATE) is the lock

    def is_stream_version_conflict(self, detail: str) -> bool:
        return "headgate_events.stream_id, headgate_events.version" in detail

    def is_tick_origin_conflict(self, detail: str) -> bool:
        return "headgate_jobs.periodic_schedule_id, headgate_jobs.periodic_tick_ms" in detail

    def notify_enqueued(self, connection: Connection, queues: Collection[str]) -> None:
        pass  # no notifications: workers in other processes poll

    def listen(self, url: URL, on_enqueued: Callable[[str], None]) -> Listener | None:
        return None


def _unopenable(path: Path, reason: str) -> StoreUnopenable:
    return StoreUnopenable(f"store URL: cannot open the SQLite database {path}: {reason}")


def _why_sqlite_cannot_open(path: Path) -> str | None:
    """What stops SQLite from opening (or creating) a database at `path` for
    writing, or None. SQLite itself says only "unable to open database file".
    OSError when the path cannot even be looked at (a name too long)."""
    directory = path.parent
    if path.is_dir():
        return "it is a directory"
    if not directory.exists():
        return f"directory {directory} does not exist"
    if not directory.is_dir():
        return f"{directory} is not a directory"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"directory {directory} is not writable (SQLite keeps its journal beside the file)"
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        return "the file is not readable and writable"
    return None


IDLE_IN_TRANSACTION_MS: Final = 5_000
"""PostgreSQL ends a session idle this long inside a transaction (ours take milliseconds)."""
POSTGRES_CONNECT_ARGS: Final = {
    "connect_timeout": 5,
    # A server or network that vanishes without closing the connection (a
    # crashed host, a dropped route) must fail our calls within seconds, not
    # after the kernel's ~15 minutes of retransmissions: keepalives probe an
    # idle connection, tcp_user_timeout bounds unacknowledged sends.
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,
}
_MIGRATION_LOCK_KEY: Final = 0x48474D49  # "HGMI"
_SERVER_NOW_MS: Final = text("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint")
_PLANNER_SWITCHES: Final = ("enable_seqscan", "enable_hashjoin", "enable_mergejoin")
_SWITCHES_OFF: Final = (
    "WITH before AS MATERIALIZED (SELECT "
    + ", ".join(f"current_setting('{name}') AS {name}" for name in _PLANNER_SWITCHES)
    + ") SELECT "
    + ", ".join(f"before.{name}, set_config('{name}', 'off', true)" for name in _PLANNER_SWITCHES)
    + " FROM before"
)
"""Reads the switches' values (the CTE is scanned first) and turns them off for
this transaction, in one round trip."""
_SWITCHES_BACK: Final = "SELECT " + ", ".join(
    f"set_config('{name}', %({name})s, true)" for name in _PLANNER_SWITCHES
)


_ARRAY_CASTS: Final = {"BIGINT": "bigint[]", "INTEGER": "integer[]", "BOOLEAN": "boolean[]"}


class _PostgreSQL(SqlBackend):
    """PostgreSQL (`postgresql+psycopg://...`), the shared store for several hosts."""

    name = "postgresql"
    one_writer_connection = False
    clock_is_local = False
    renames_constraints = True
    writes_begin_locked = False

    def __init__(self) -> None:
        self._array_types: dict[type[TypeEngine[Any]], ARRAY[Any]] = {}

    def checked_url(self, url: URL) -> URL:
        """`postgresql://` and `postgres://` (a platform's usual DATABASE_URL) name no
        driver: they mean psycopg 3, the one Headgate ships with."""
        _, _, driver = url.drivername.partition("+")
        if driver not in ("", "psycopg"):
            raise ValidationError(
                "store URL", f"driver {driver!r} is not supported; use postgresql:// (psycopg 3)"
            )
        return url.set(drivername="postgresql+psycopg")

    def is_missing(self, url: URL) -> bool:
        return False  # the server says so when connected to (a clear StoreUnavailable)

    def check_openable(self, url: URL) -> None:
        pass  # only the server can say, when connected to

    def inspecting_engine(self, url: URL) -> Engine:
        engine = create_engine(url, poolclass=NullPool, connect_args=POSTGRES_CONNECT_ARGS)

        @event.listens_for(engine, "connect")
        def _read_only(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("SET default_transaction_read_only = on")
            cursor.close()
            dbapi_connection.commit()

        return engine

    def create_engine(
        self, url: URL, busy_timeout_s: float, *, single_connection: bool = False
    ) -> Engine:
        engine = create_engine(
            url,
            pool_pre_ping=True,
            pool_size=10,
            max_overflow=10,
            pool_timeout=busy_timeout_s,
            connect_args=POSTGRES_CONNECT_ARGS,
        )

        @event.listens_for(engine, "connect")
        def _session_limits(dbapi_connection: Any, _record: Any) -> None:
            # A process frozen mid-transaction (GC pause, SIGSTOP) must not hold
            # the log head or the lease row forever: the server ends such a
            # session, rolling its transaction back, so a standby can take over.
            cursor = dbapi_connection.cursor()
            cursor.execute(f"SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS}")
            cursor.execute(f"SET lock_timeout = {int(busy_timeout_s * 1000)}")
            # psycopg prepares a statement after a few runs, and PostgreSQL may
            # then reuse a generic plan chosen while a table was still empty: a
            # sequential scan that never goes away as the table grows. Plan
            # each execution.
            cursor.execute("SET plan_cache_mode = force_custom_plan")
            cursor.close()
            dbapi_connection.commit()
            # Arrays (the hot path's `= ANY(...)` and unnest parameters) go in
            # binary: the text form quotes and checks each element in Python,
            # which cost about a microsecond per id and column of every tick.
            # (Imported here: a SQLite-only host need not load libpq.)
            from psycopg.types.array import ListBinaryDumper  # noqa: PLC0415 (see above)

            dbapi_connection.adapters.register_dumper(list, ListBinaryDumper)

        return engine

    def array_of(self, element: TypeEngine[Any]) -> ARRAY[Any]:
        """The array type for a column's values: text[] for any string (a cast to
        varchar(n)[] would silently truncate a longer value into a false match).
        Made once per element type: building a type costs more than the hot
        path's whole query."""
        kind = String if isinstance(element, String) else type(element)
        cached = self._array_types.get(kind)
        if cached is None:
            cached = self._array_types[kind] = ARRAY(Text() if kind is String else kind())
        return cached

    def is_one_of(self, column: ColumnElement[Any], values: Sequence[Any]) -> ColumnElement[bool]:
        return column == any_(literal(list(values), self.array_of(column.type)))

    def each_of(self, values: Sequence[Any], like: ColumnElement[Any]) -> TableValuedAlias:
        # With `= ANY(array)` the planner weighs the whole set against its
        # statistics, and while those lag a young or fast-growing table (until
        # autovacuum next analyses it) it chose to scan every pending job or
        # every event instead: 10 to 20 times slower a few minutes into a busy
        # store.
        return (
            func.unnest(literal(list(values), self.array_of(like.type)))
            .table_valued("value")
            .render_derived(name="wanted")
        )

    @contextlib.contextmanager
    def probing_indexes(self, connection: Connection) -> Iterator[None]:
        """For statements that touch a batch of keys in a growing table (the log,
        the jobs, the schedules). While the table's statistics lag its growth
        (until autovacuum next analyses it), the planner believes it small and
        reads all of it: a scan, or a hash join with the whole table, on every
        batch. Only for these statements: a write transaction may also compare
        or copy whole tables (verify, replay), which need those plans. The
        switches get back the values they had, whoever set them.

        Not restored if a statement inside fails: PostgreSQL then refuses
        every statement until the transaction rolls back, which ends the
        settings too.
        """
        before = connection.exec_driver_sql(_SWITCHES_OFF).one()
        yield
        values = {name: before[index * 2] for index, name in enumerate(_PLANNER_SWITCHES)}
        connection.exec_driver_sql(_SWITCHES_BACK, values).close()

    def bulk_insert(
        self, connection: Connection, table: Table, rows: Sequence[dict[str, Any]]
    ) -> None:
        """COPY ... FROM STDIN: the fastest way in for a batch. A single row is an
        INSERT: COPY's start and its end are a round trip each."""
        if not rows:
            return
        if len(rows) == 1:
            connection.execute(insert(table).values(rows[0]))
            return
        names = tuple(rows[0])
        quote = connection.dialect.identifier_preparer.quote
        columns = ", ".join(quote(name) for name in names)
        statement = f"COPY {quote(table.name)} ({columns}) FROM STDIN"
        driver = connection.connection.driver_connection
        assert driver is not None
        with (
            bulk.as_sqlalchemy_errors(connection, statement),
            driver.cursor() as cursor,
            cursor.copy(statement) as copy,
        ):
            for values in map(bulk.values_in(names), rows):
                copy.write_row(values)

    def bulk_update(
        self, connection: Connection, table: Table, key_column: str, rows: Sequence[dict[str, Any]]
    ) -> None:
        if len(rows) == 1:
            # One row by its key's equality: an index probe, planned as one
            # (a command's single write saves the switches' two round trips).
            (row,) = rows
            values = {name: value for name, value in row.items() if name != key_column}
            connection.execute(
                update(table).where(table.c[key_column] == row[key_column]).values(values)
            )
            return
        # Left to itself, the planner hashed the whole table to join it with
        # the batch: 73 ms for 1,000 rows among 100,000 schedules, against
        # 17 ms probing.
        with self.probing_indexes(connection):
            for names, group in bulk.group_by_columns(rows).items():
                self._update_from_arrays(connection, table, key_column, names, group)

    def _update_from_arrays(
        self,
        connection: Connection,
        table: Table,
        key_column: str,
        names: tuple[str, ...],
        rows: Sequence[dict[str, Any]],
    ) -> None:
        """One UPDATE ... FROM unnest(arrays) for all rows: one statement, not one per row."""
        quote = connection.dialect.identifier_preparer.quote
        casts = [
            _ARRAY_CASTS.get(str(table.c[name].type.compile(dialect=connection.dialect)), "text[]")
            for name in names
        ]
        source = ", ".join(f"%(a{i})s::{cast}" for i, cast in enumerate(casts))
        columns = ", ".join(quote(name) for name in names)
        assignments = ", ".join(
            f"{quote(name)} = v.{quote(name)}" for name in names if name != key_column
        )
        sql = (
            f"UPDATE {quote(table.name)} AS t SET {assignments} "
            f"FROM unnest({source}) AS v({columns}) "
            f"WHERE t.{quote(key_column)} = v.{quote(key_column)}"
        )
        arrays = {f"a{i}": [row[name] for row in rows] for i, name in enumerate(names)}
        driver = connection.connection.driver_connection
        assert driver is not None
        with bulk.as_sqlalchemy_errors(connection, sql), driver.cursor() as cursor:
            cursor.execute(sql, arrays)

    def locked(self, query: Select[Any], *, shared: bool = False) -> Select[Any]:
        return query.with_for_update(read=shared)

    def first_of_each(self, table: Table, stream_ids: Sequence[str]) -> Select[Any]:
        wanted = self.each_of(stream_ids, table.c.stream_id)
        # LIMIT 1 (there is at most one row anyway) keeps the planner from
        # flattening the LATERAL into a join, which it then ran as a hash join
        # over every stream's first event while its statistics lagged the log.
        first = (
            select(table)
            .where(table.c.stream_id == wanted.c.value, table.c.version == 1)
            .limit(1)
            .lateral("first")
        )
        return select(first).select_from(wanted.join(first, true()))

    def insert_if_absent(self, table: Table, key: str) -> Insert:
        return pg_dialect.insert(table).on_conflict_do_nothing(index_elements=[key])

    def server_now_ms(self, connection: Connection) -> int:
        return int(connection.execute(_SERVER_NOW_MS).scalar_one())

    def begin_write(self, connection: Connection, *, held: bool) -> None:
        pass  # nothing to set: the server checkpoints on its own schedule

    def checkpoint(self, engine: Engine) -> None:
        pass  # the server checkpoints its write-ahead log itself (and no connection is used)

    def rename_tables(
        self,
        connection: Connection,
        tables: Mapping[str, str],
        indexes: Mapping[str, str],
        checks: Mapping[str, tuple[str, str]],
    ) -> None:
        """A primary key is named `<table>_pkey`; an index (a unique constraint's
        too) is renamed by ALTER INDEX, a check constraint by ALTER TABLE."""
        execute = connection.exec_driver_sql
        for old, new in tables.items():
            execute(f"ALTER TABLE {old} RENAME TO {new}")
            execute(f"ALTER INDEX {old}_pkey RENAME TO {new}_pkey")
        for old, new in indexes.items():
            execute(f"ALTER INDEX {old} RENAME TO {new}")
        for old, (table, new) in checks.items():
            execute(f"ALTER TABLE {table} RENAME CONSTRAINT {old} TO {new}")

    def reclaim_space(self, engine: Engine, tables: Sequence[Table]) -> None:
        """VACUUM: autovacuum would get there eventually; doing it right after
        compaction keeps a busy log's footprint flat whatever autovacuum's
        settings are. Plain VACUUM takes no lock that blocks readers or writers."""
        names = ", ".join(engine.dialect.identifier_preparer.format_table(t) for t in tables)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text(f"VACUUM {names}"))

    def lock_for_migration(self, connection: Connection) -> None:
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})

    def is_stream_version_conflict(self, detail: str) -> bool:
        return "uq_headgate_events_stream_version" in detail

    def is_tick_origin_conflict(self, detail: str) -> bool:
        return "ux_headgate_jobs_periodic_origin" in detail

    def notify_enqueued(self, connection: Connection, queues: Collection[str]) -> None:
        """NOTIFY is transactional: listeners hear it when (and only if) this commits.

        A channel spans the whole database, so the payload names the schema
        the store lives in: stores side by side in one database (one schema
        each) do not wake each other's workers.
        """
        for queue in sorted(set(queues)):
            connection.execute(
                text("SELECT pg_notify(:channel, current_schema() || :separator || :queue)"),
                {"channel": ENQUEUED_CHANNEL, "separator": _PAYLOAD_SEPARATOR, "queue": queue},
            )

    def listen(self, url: URL, on_enqueued: Callable[[str], None]) -> Listener | None:
        return _PostgresListener(url.set(drivername="postgresql"), on_enqueued)


class _PostgresListener(Listener):
    """LISTEN on a connection of its own (not the pool's), on a daemon thread that
    reconnects with back-off; a pooler in transaction mode cannot carry LISTEN,
    which is why workers can be set to poll only."""

    RECONNECT_MAX_S: Final = 30.0
    WAIT_S: Final = 0.25
    """How long a wait for notifications lasts before it checks for close()."""

    def __init__(self, url: URL, on_enqueued: Callable[[str], None]) -> None:
        self._conninfo = url.render_as_string(hide_password=False)
        self._on_enqueued = on_enqueued
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="headgate-listen", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        import psycopg  # noqa: PLC0415 (PostgreSQL only)

        delay = 0.1
        while not self._stopped.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True, connect_timeout=5) as conn:
                    schema_row = conn.execute("SELECT current_schema()").fetchone()
                    ours = f"{schema_row[0] if schema_row else ''}{_PAYLOAD_SEPARATOR}"
                    conn.execute(f"LISTEN {ENQUEUED_CHANNEL}")
                    delay = 0.1
                    while not self._stopped.is_set():
                        for note in conn.notifies(timeout=self.WAIT_S):
                            if note.payload.startswith(ours):
                                self._on_enqueued(note.payload.removeprefix(ours))
            except Exception:  # a dropped connection: reconnect, polling covers the gap
                self._stopped.wait(delay)
                delay = min(delay * 2, self.RECONNECT_MAX_S)


class code_point_order(FunctionElement[str]):  # noqa: N801 (an SQL function's name)
    """A text column compared and ordered code point by code point, on every backend.

    SQLite compares text so already (BINARY). PostgreSQL compares it by the
    database's collation, which may be a language's (en_US: `a-b` sorts between
    `ab` and `ac`); there it is the column under the "C" collation, whose order
    is the code points'. So a list in this order is the same on both backends,
    and `prefix <= value < prefix_upper_bound(prefix)` holds for exactly the
    values starting with the prefix. An index must name the same expression to
    serve it.
    """

    type = String()
    name = "code_point_order"
    inherit_cache = True


@compiles(code_point_order)
def _code_point_order_as_is(element: code_point_order, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.clauses, **kw))


@compiles(code_point_order, "postgresql")
def _code_point_order_in_c(element: code_point_order, compiler: Any, **kw: Any) -> str:
    return f'{compiler.process(element.clauses, **kw)} COLLATE "C"'


SQLITE: Final = _Sqlite()
POSTGRESQL: Final = _PostgreSQL()
_BY_NAME: Final[dict[str, SqlBackend]] = {SQLITE.name: SQLITE, POSTGRESQL.name: POSTGRESQL}
_URL_SCHEMES: Final[dict[str, SqlBackend]] = {**_BY_NAME, "postgres": POSTGRESQL}
"""The backend each URL scheme names: the backends' own names, and `postgres`,
which SQLAlchemy no longer takes but Heroku- and Render-style URLs still use."""


def backend_named(name: str) -> SqlBackend:
    return _BY_NAME[name]


def checked_store_url(url: URL) -> URL:
    """The store URL as its backend takes it (its scheme and driver spelled as
    SQLAlchemy knows them); ValueError naming what is wrong."""
    scheme = url.drivername.partition("+")[0]
    backend = _URL_SCHEMES.get(scheme)
    if backend is None:
        raise ValidationError(
            "store URL", f"{scheme!r} is not supported; use sqlite:///path.db or postgresql://"
        )
    return backend.checked_url(url)


def backend_of(bind: Engine | Connection) -> SqlBackend:
    """The backend of an engine or connection (its SQLAlchemy dialect's name)."""
    return _BY_NAME[bind.dialect.name]
