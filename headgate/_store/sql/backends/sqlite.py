"""SQLite (`sqlite:///path.db`), the embedded default.

WAL so readers never block the writer, a busy timeout so writers queue
instead of failing, and `synchronous=FULL` so an acknowledged commit survives
a power cut. Write transactions start with BEGIN IMMEDIATE, taking the write
lock up front, so a read-then-write transaction can never be overtaken.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final
from urllib.request import pathname2url

from sqlalchemy import (
    ColumnElement,
    Engine,
    Select,
    String,
    Table,
    bindparam,
    create_engine,
    event,
    func,
    literal,
    select,
)
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, Connection
from sqlalchemy.pool import NullPool, StaticPool
from sqlalchemy.sql.dml import Insert, Update
from sqlalchemy.sql.selectable import TableValuedAlias

from headgate._errors import StoreUnopenable, ValidationError
from headgate._forksafe import quiesce_for_forks, renew_in_forked_children
from headgate._store.port import Listener
from headgate._store.sql import bulk
from headgate._store.sql.backends.connector import Connector
from headgate._store.sql.backends.dialect import Dialect
from headgate._store.sql.backends.log_order import HeadOrder, LogOrder
from headgate._store.sql.backends.maintenance import Maintenance
from headgate._store.sql.prepared import Prepared

NAME: Final = "sqlite"


READ_CONNECTIONS: Final = 32
"""Reading connections a process keeps open (as many again may open for a burst)."""


class SqliteConnector(Connector):
    """One file; engines that set WAL, durability and BEGIN IMMEDIATE for writes."""

    one_writer_connection = True
    explicit_transactions = False
    PAGE_SIZE: Final = 4_096

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
            **(
                {"poolclass": StaticPool}
                if single_connection
                else {
                    # Connections past the pool's size are closed on return: a
                    # host with more reading threads than that opened a new one
                    # (its PRAGMAs, a cold page cache) for nearly every read.
                    "pool_size": READ_CONNECTIONS,
                    "max_overflow": READ_CONNECTIONS,
                    "pool_timeout": busy_timeout_s,
                }
            ),
        )
        page_size = self.PAGE_SIZE
        path = str(url.database)

        @event.listens_for(engine, "do_connect")
        def _create_owner_only(*_: Any) -> None:
            create_owner_only(path)

        @event.listens_for(engine, "connect")
        def _configure(dbapi_connection: Any, _record: Any) -> None:
            # Take transaction control away from the sqlite3 module; see "begin".
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            # Only a new, empty database takes a page size (and only before WAL
            # mode is set); an existing one keeps its own (the store how-to:
            # how to convert one). Every commit writes each page it dirtied to
            # the WAL whole, and a worker's turn dirties a few dozen scattered
            # pages: with 4 KiB pages it writes about a quarter of what 16 KiB
            # pages do per job (11 against 39 KB), and ticks run as fast.
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

    def __init__(self) -> None:
        self._moves: dict[int, Prepared] = {}

    def finish_write(
        self,
        connection: Connection,
        move_head: Update,
        position: int | None,
        enqueued_on: Collection[str],
    ) -> str | None:
        # Nothing to send: other processes watch the file (see listen).
        if position is not None:
            prepared = self._moves.get(id(move_head))
            if prepared is None:
                prepared = self._moves.setdefault(id(move_head), Prepared(move_head))
            prepared.run(connection, position=position)
        return None

    def finish_write_now(
        self,
        connection: Connection,
        move_head: Update,
        position: int | None,
        enqueued_on: Collection[str],
    ) -> None:
        if position is not None:
            connection.execute(move_head, {"position": position})

    def listen(self, url: URL, on_enqueued: Callable[[str | None], None]) -> Listener | None:
        """SQLite has no notifications: a thread watches the file's data version
        (`PRAGMA data_version`, which moves whenever another connection commits)
        and calls `on_enqueued(None)`, "look now", when it moves."""
        return _SqliteWatcher(str(url.database), on_enqueued)


class _SqliteWatcher(Listener):
    """Reads the database's data version every `EVERY_S` on a connection of its own.

    The version is kept in the WAL's shared memory, so a read is a short read
    transaction that loads no table; it moves for every commit of another
    connection (this process's writer included: such a wake finds nothing
    new, and is bounded by the writer's own commits). A worker of another
    process is then woken within about `EVERY_S` of an enqueue, not at its
    next poll. A fork waits for a read in flight (SQLite's lock bookkeeping
    is per process); the child has no watcher thread and watches nothing.
    """

    EVERY_S: Final = 0.005
    RETRY_S: Final = 1.0

    def __init__(self, path: str, on_change: Callable[[str | None], None]) -> None:
        self._uri = f"file:{pathname2url(path)}?mode=rw"  # never creates a missing file
        self._on_change = on_change
        self._stopped = threading.Event()
        self._reading = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="headgate-watch", daemon=True)
        quiesce_for_forks(self)
        renew_in_forked_children(self)
        self._thread.start()

    def close(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)

    def before_fork(self) -> None:
        self._reading.acquire()

    def after_fork_in_parent(self) -> None:
        self._reading.release()

    def after_fork_in_child(self) -> None:
        self._stopped.set()
        self._reading = threading.Lock()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                connection = sqlite3.connect(self._uri, uri=True, timeout=1.0, isolation_level=None)
                try:
                    self._watch(connection)
                finally:
                    connection.close()
            except sqlite3.Error:  # the file unreadable for now: polling covers the gap
                self._stopped.wait(self.RETRY_S)

    def _version(self, connection: sqlite3.Connection) -> int:
        with self._reading:
            return int(connection.execute("PRAGMA data_version").fetchone()[0])

    def _watch(self, connection: sqlite3.Connection) -> None:
        seen = self._version(connection)
        while not self._stopped.wait(self.EVERY_S):
            version = self._version(connection)
            if version != seen:
                seen = version
                self._on_change(None)


class SqliteDialect(Dialect):
    """Batches of keys as JSON arrays; the write transaction is the lock."""

    clock_is_local = True
    positions_from_a_sequence = False

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

    def each_of_bound(self, name: str, like: ColumnElement[Any]) -> TableValuedAlias:
        values = bindparam(name, type_=String())
        return func.json_each(values).table_valued("value").alias("wanted")

    def is_one_of_bound(self, name: str, column: ColumnElement[Any]) -> ColumnElement[bool]:
        each = func.json_each(bindparam(name, type_=String())).table_valued("value").alias(name)
        return column.in_(select(each.c.value))

    def batch_value(self, values: Sequence[Any]) -> Any:
        return json.dumps(list(values))

    @contextlib.contextmanager
    def probing_indexes(self, connection: Connection) -> Iterator[None]:
        yield  # SQLite plans by index whenever one serves

    @contextlib.contextmanager
    def scanning_tables(self, connection: Connection) -> Iterator[None]:
        yield  # nothing is switched off

    def write_settings(self) -> tuple[ColumnElement[Any], ...]:
        return ()  # SQLite plans by index whenever one serves

    def write_settings_made(self, connection: Connection) -> None:
        pass

    def write_settings_ended(self, connection: Connection) -> None:
        pass

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

    def locked_skipping(self, query: Select[Any]) -> Select[Any]:
        return query  # as `locked`: no other writer holds a row

    def log_order(self, head_table: str, sequence: str) -> LogOrder:
        return HeadOrder()

    def first_of_each(self, table: Table, wanted: TableValuedAlias) -> Select[Any]:
        return select(table).where(
            table.c.stream_id.in_(select(wanted.c.value)), table.c.version == 1
        )

    def insert_if_absent(self, table: Table, key: str) -> Insert:
        return sqlite_dialect.insert(table).on_conflict_do_nothing(index_elements=[key])

    def insert_or_replace(
        self, table: Table, keys: Sequence[str], values: dict[str, Any]
    ) -> Insert:
        replaced = {name: value for name, value in values.items() if name not in keys}
        return (
            sqlite_dialect.insert(table)
            .values(values)
            .on_conflict_do_update(index_elements=list(keys), set_=replaced)
        )

    def commits_with_host(self, connection: Connection) -> bool:
        """Asked after a write: sqlite3 has opened a transaction for it, unless it
        runs in autocommit."""
        return bool(getattr(connection.connection.dbapi_connection, "in_transaction", True))

    def database_identity(self, connection: Connection) -> tuple[Any, ...]:
        rows = connection.exec_driver_sql("PRAGMA database_list").all()
        (path,) = [str(row[2]) for row in rows if row[1] == "main"]
        return (os.path.realpath(path) if path else "",)

    def raise_to(self, table: Table, keys: Sequence[str], column: str) -> Insert:
        statement = sqlite_dialect.insert(table)
        greater = func.max(table.c[column], statement.excluded[column])
        return statement.on_conflict_do_update(index_elements=list(keys), set_={column: greater})

    def server_now_ms(self, connection: Connection) -> int:
        raise NotImplementedError("a SQLite store's clock is this host's")

    def is_stream_version_conflict(self, detail: str) -> bool:
        return "headgate_events.stream_id, headgate_events.version" in detail

    def is_tick_origin_conflict(self, detail: str) -> bool:
        return "headgate_jobs.periodic_schedule_id, headgate_jobs.periodic_tick_ms" in detail


class SqliteMaintenance(Maintenance):
    """Checkpoints of the WAL; SQLite reuses freed pages and locks by its write
    transaction."""

    renames_constraints = False

    def begin_write(self, connection: Connection, *, held: bool) -> None:
        # SQLite checkpoints the WAL inside the commit that grows it past 1,000
        # pages; a commit held for an instant must not pay for that (its
        # caller runs checkpoint() afterwards instead).
        pages = 0 if held else 1000
        if connection.info.get("wal_autocheckpoint") != pages:  # a setting of the connection
            connection.exec_driver_sql(f"PRAGMA wal_autocheckpoint={pages}")
            connection.info["wal_autocheckpoint"] = pages

    def checkpoint(self, engine: Engine) -> None:
        with engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")

    def reclaim_space(self, engine: Engine, tables: Sequence[Table]) -> None:
        pass  # SQLite reuses freed pages by itself (VACUUM would rewrite the file)

    def rename_tables(
        self,
        connection: Connection,
        tables: Mapping[str, str],
        indexes: Mapping[str, str],
        checks: Mapping[str, tuple[str, str]],
    ) -> None:
        raise NotImplementedError("SQLite cannot rename a table's inline constraints")

    def lock_for_migration(self, connection: Connection) -> None:
        pass  # the migration's write transaction (BEGIN IMMEDIATE) is the lock


def _unopenable(path: Path, reason: str) -> StoreUnopenable:
    return StoreUnopenable(f"store URL: cannot open the SQLite database {path}: {reason}")


OWNER_ONLY: Final = 0o600


def create_owner_only(path: str) -> None:
    """Create the database file, empty, readable and writable by its owner alone,
    unless it exists: it holds every payload, result and error, and SQLite would
    create it as the umask allows (world-readable, 0644, under the usual 022).
    SQLite gives its `-wal` and `-shm` files the database file's mode, so they
    are owner-only too. An existing file keeps the mode it has (an operator may
    have opened it to a group on purpose). A file that cannot be created here is
    left to SQLite, whose error, translated, names the store."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, OWNER_ONLY)
    except OSError:  # it exists (nearly always), or SQLite says why it cannot be made
        return
    os.close(descriptor)


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
