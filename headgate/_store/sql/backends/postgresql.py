"""PostgreSQL (`postgresql+psycopg://...`), the shared store for several hosts.

Batches of keys travel as binary arrays, bulk writes as COPY and UPDATE ...
FROM unnest, rows are locked FOR UPDATE, the clock is the server's, and
workers of other processes are woken by LISTEN/NOTIFY.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, Final

from sqlalchemy import (
    ColumnElement,
    Engine,
    Integer,
    Select,
    String,
    Table,
    Text,
    any_,
    bindparam,
    create_engine,
    event,
    func,
    literal,
    select,
    text,
    true,
    update,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.pool import NullPool
from sqlalchemy.sql import Executable
from sqlalchemy.sql.dml import Insert, Update
from sqlalchemy.sql.selectable import TableValuedAlias
from sqlalchemy.types import TypeEngine

from headgate._errors import ValidationError
from headgate._store.port import Listener
from headgate._store.sql import bulk
from headgate._store.sql.backends.connector import Connector
from headgate._store.sql.backends.dialect import Dialect, code_point_order
from headgate._store.sql.backends.log_order import LogOrder
from headgate._store.sql.backends.maintenance import Maintenance
from headgate._store.sql.prepared import Prepared

NAME: Final = "postgresql"
ENQUEUED_CHANNEL: Final = "headgate_enqueued"
_PAYLOAD_SEPARATOR: Final = "\n"

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
_MIGRATION_LOCK: Final = text(
    "SELECT pg_advisory_xact_lock(1212632393, hashtext(coalesce(current_schema(), '')))"
)
"""Per schema ("HGMI", the schema's name): stores in other schemas of one database
migrate, and open, without waiting for each other. Its first half has bit 30 set,
so it is never a writer's marker (`SequenceOrder`: those keys are below 2**30)."""
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
_GENERIC_PLANS: Final = ("plan_cache_mode", "auto")
_NO_JIT: Final = ("jit", "off")
"""With scans switched off, a scan the planner must still make (a table of a few
rows, such as the limits) is priced as if disabled, far above the JIT's
threshold: each run then compiled it, 20 ms a claim. A write's statements are
index probes, which JIT never pays for."""
_SWITCHES_ON: Final = "SELECT " + ", ".join(
    f"set_config('{name}', '{value}', true)"
    for name, value in (
        *((n, "on") for n in _PLANNER_SWITCHES),
        ("plan_cache_mode", "force_custom_plan"),
    )
)
_PROBES_FOR_THE_TRANSACTION: Final = "headgate_probes_for_the_transaction"
"""Set in a connection's info while its transaction has the planner switches off."""
IDLE_BEFORE_PING_S: Final = 1.0
"""A pooled connection unused this long is pinged before it is handed out."""


def _ping_when_idle(engine: Engine) -> None:
    """Ping a connection handed out after an idle second, not on every checkout.

    A connection the server dropped (a restart, a failover) is then replaced
    before its first statement whenever the store sat idle; a busy one pays no
    round trip per transaction. One dropped within the second fails its first
    statement with StoreUnavailable, which the runtime's loops retry and a
    command (an enqueue, an API write) reports (a 503 on the API); the pool
    then replaces the connection.
    """

    @event.listens_for(engine, "checkin")
    def _note_idle(_dbapi_connection: Any, record: Any) -> None:
        if record is not None:
            record.info["headgate_idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get("headgate_idle_since")
        if idle_since is None or time.monotonic() - idle_since < IDLE_BEFORE_PING_S:
            return
        try:
            dbapi_connection.execute("SELECT 1").close()
            dbapi_connection.rollback()
        except Exception as error:
            raise sa_exc.DisconnectionError(str(error)) from error


_ARRAY_CASTS: Final = {
    "BIGINT": "bigint[]",
    "INTEGER": "integer[]",
    "SMALLINT": "smallint[]",
    "BOOLEAN": "boolean[]",
}
_EXPECTED: Final = "expected_version"
"""The column a compare-and-set update's batch carries each row's expected version in."""
COPY_FROM_ROWS: Final = 20
"""Batches this large are inserted by COPY, smaller ones from arrays in one
statement. COPY costs a round trip more, but psycopg dumps arrays in Python:
from 20 rows of events and jobs on, COPY took a third of the time arrays took
(0.9 ms against 2.7; 8.6 against 40 at 500: benchmarks/bulk_insert.py), more
than a network round trip saves."""


def _require_the_driver() -> None:
    """psycopg 3 comes with the `postgresql` extra, so a SQLite-only install goes
    without it; a PostgreSQL URL there is refused in one line naming the extra,
    not with the driver's import error from deep inside engine creation."""
    try:
        importlib.import_module("psycopg")
    except ImportError as error:
        raise ValidationError(
            "store URL",
            f"PostgreSQL support is not installed (psycopg 3: {error}); "
            "install it with: pip install 'headgate-jobs[postgresql]'",
        ) from None


class PostgresConnector(Connector):
    """A pooled engine per store with session limits, and LISTEN on a connection
    of its own."""

    one_writer_connection = True
    explicit_transactions = True

    def __init__(self) -> None:
        self._finishes: dict[tuple[int, str], Prepared] = {}
        self._finishes_lock = threading.Lock()

    def checked_url(self, url: URL) -> URL:
        """`postgresql://` and `postgres://` (a platform's usual DATABASE_URL) name no
        driver: they mean psycopg 3, the one Headgate ships with."""
        _, _, driver = url.drivername.partition("+")
        if driver not in ("", "psycopg"):
            raise ValidationError(
                "store URL", f"driver {driver!r} is not supported; use postgresql:// (psycopg 3)"
            )
        _require_the_driver()
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
        """A pool for reads, or (`single_connection`) the one connection a process's
        serialised writes go through, so its statements stay prepared. Every
        setting a write changes is its transaction's own (`write_settings`):
        a pooler in transaction mode hands the server connection on clean."""
        engine = create_engine(
            url,
            pool_size=1 if single_connection else 10,
            max_overflow=0 if single_connection else 10,
            # The writer's BEGIN and COMMIT are sent by the store itself, each with
            # the statement beside it (Database.write_session).
            **({"isolation_level": "AUTOCOMMIT"} if single_connection else {}),
            pool_timeout=busy_timeout_s,
            connect_args=POSTGRES_CONNECT_ARGS,
        )
        _ping_when_idle(engine)

        @event.listens_for(engine, "connect")
        def _session_limits(dbapi_connection: Any, record: Any) -> None:
            # A process frozen mid-transaction (GC pause, SIGSTOP) must not hold
            # the log head or the lease row forever: the server ends such a
            # session, rolling its transaction back, so a standby can take over.
            cursor = dbapi_connection.cursor()
            cursor.execute(f"SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS}")
            cursor.execute(f"SET lock_timeout = {int(busy_timeout_s * 1000)}")
            # psycopg prepares a statement after a few runs, and PostgreSQL may
            # then reuse a generic plan chosen while a table was still empty: a
            # sequential scan that never goes away as the table grows. Plan each
            # execution (a log write lifts this for itself: `write_settings`).
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

    def finish_write(
        self,
        connection: Connection,
        move_head: Update,
        position: int | None,
        enqueued_on: Collection[str],
    ) -> str | None:
        """NOTIFY is transactional: listeners hear it when (and only if) this commits.
        The head's move and every queue's NOTIFY are one statement (the move as
        a data-modifying WITH, which runs whether or not it is read), its values
        inlined by the driver, for the write to send with its COMMIT.

        A channel spans the whole database, so the payload names the schema
        the store lives in: stores side by side in one database (one schema
        each) do not wake each other's workers.
        """
        queues = sorted(set(enqueued_on))
        if not queues:
            if position is None:
                return None
            return self._inlined(connection, self._finish(move_head, "move"), position=position)
        if position is None:
            return self._inlined(connection, self._finish(move_head, "notify"), queues=queues)
        statement = self._finish(move_head, "both")
        return self._inlined(connection, statement, position=position, queues=queues)

    def finish_write_now(
        self,
        connection: Connection,
        move_head: Update,
        position: int | None,
        enqueued_on: Collection[str],
    ) -> None:
        queues = sorted(set(enqueued_on))
        which = ("both" if queues else "move") if position is not None else "notify"
        if position is None and not queues:
            return
        values: dict[str, Any] = {}
        if position is not None:
            values["position"] = position
        if queues:
            values["queues"] = queues
        connection.execute(self._finish(move_head, which).statement, values)

    def _inlined(self, connection: Connection, statement: Prepared, **values: Any) -> str:
        """The statement with its values quoted in by the driver (client-side binding),
        so it can travel in one simple query with the COMMIT."""
        import psycopg  # noqa: PLC0415 (PostgreSQL only)

        compiled, parameters = statement.bound(connection, **values)
        driver = connection.connection.driver_connection
        assert driver is not None
        return psycopg.ClientCursor(driver).mogrify(compiled.sql, parameters)

    def _finish(self, move_head: Update, which: str) -> Prepared:
        """The head's move, the NOTIFY of a list of queues, or both in one statement,
        each built once."""
        key = (id(move_head), which)
        statement = self._finishes.get(key)
        if statement is not None:
            return statement
        queue = (
            func.unnest(bindparam("queues", type_=ARRAY(Text())))
            .table_valued("queue")
            .render_derived(name="q")
        )
        payload = func.current_schema().concat(_PAYLOAD_SEPARATOR).concat(queue.c.queue)
        notify = select(func.pg_notify(ENQUEUED_CHANNEL, payload)).select_from(queue)
        built: Executable = {
            "move": move_head,
            "notify": notify,
            "both": notify.add_cte(move_head.cte("moved")),
        }[which]
        with self._finishes_lock:
            return self._finishes.setdefault(key, Prepared(built))

    def listen(self, url: URL, on_enqueued: Callable[[str | None], None]) -> Listener | None:
        return _PostgresListener(url.set(drivername="postgresql"), on_enqueued)


_IDENTITY: Final = select(
    func.current_database(), func.current_schema(), func.pg_postmaster_start_time()
)


class SequenceOrder(LogOrder):
    """PostgreSQL's order of writes: positions from a sequence, writers holding
    only what they touch, readers stopping at the safe head (`backends.log_order`)."""

    moves_head = False

    def __init__(self, head_table: str, sequence: str) -> None:
        # The first half of every advisory lock key of this store: its log head
        # table's oid, so stores in other schemas of one database share no lock.
        space = f"('{head_table}'::regclass::oid::bigint & 1073741823)::int4"
        locks_space = f"({space} | 1073741824)"  # what writers decide on
        fence = f"({space} | 536870912), 0"  # every writer shares it, a rebuild takes it
        self._marker = (
            f"SELECT pg_advisory_xact_lock_shared({fence}),"
            f" pg_advisory_xact_lock_shared({space}, "
            f"(coalesce(pg_sequence_last_value('{sequence}'::regclass), 0) + 1)"
            "::bit(32)::int4)"
        )
        """What a writer holds from its first statement: the fence, shared, and its
        marker, the lowest position it could draw (its low 32 bits; a reader
        rebuilds the rest from the sequence)."""
        self._exclude_writers = text(f"SELECT pg_advisory_xact_lock({fence})")
        self._markers = text(
            "SELECT virtualtransaction, objid::bigint FROM pg_locks"
            " WHERE locktype = 'advisory' AND objsubid = 2 AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            f" AND classid::bigint = {space} AND pid <> pg_backend_pid()"
        )
        self._last_drawn = text(f"SELECT pg_sequence_last_value('{sequence}'::regclass)")
        self._draw = text(
            f"SELECT nextval('{sequence}') FROM generate_series(1, :count)"
        ).bindparams(bindparam("count", type_=Integer))
        self._sequence = sequence
        self._drawing_inserts: dict[tuple[str, tuple[str, ...]], str] = {}
        self._lock_keys = text(
            f"SELECT count(pg_advisory_xact_lock({locks_space}, hashtext(key)))"
            " FROM (SELECT unnest(CAST(:keys AS text[])) AS key ORDER BY 1) AS wanted"
        )

    def opening(self, head_read: str) -> str:
        # Two statements, so the second (the rebuild flag's read) has a snapshot
        # taken after the fence is held: a writer that waited for a rebuild's
        # transaction (`exclude_writers`) sees what it committed.
        return f"{self._marker}; {head_read}"

    def entered(self, lock_head: Executable) -> Executable:
        return text(self._marker)

    def draw(self, connection: Connection, count: int, head: int) -> list[int]:
        if count <= 0:
            return []
        return [int(position) for (position,) in connection.execute(self._draw, {"count": count})]

    def insert_drawing(
        self, connection: Connection, table: Table, rows: Sequence[dict[str, Any]]
    ) -> list[int] | None:
        """A batch below `COPY_FROM_ROWS`: one INSERT ... SELECT nextval(...) FROM
        unnest(arrays) RETURNING, not a draw and an insert. The rows are sorted by
        their place in the batch before the select list is computed (PostgreSQL
        evaluates a volatile select list after the ORDER BY below it), so the
        positions follow the batch's order; checked on what comes back all the
        same, as a write that broke it must not commit."""
        if not rows or len(rows) >= COPY_FROM_ROWS:
            return None
        names = tuple(rows[0])
        sql = self._drawing_insert_sql(connection, table, names)
        arrays = {f"a{i}": [row[name] for row in rows] for i, name in enumerate(names)}
        with bulk.driver_cursor(connection, sql) as cursor:
            cursor.execute(sql, arrays)
            returned = cursor.fetchall()
        positions = [int(position) for position, _, _ in returned]
        keys = [(stream_id, version) for _, stream_id, version in returned]
        if keys != [(row["stream_id"], row["version"]) for row in rows] or any(
            later <= earlier for earlier, later in itertools.pairwise(positions)
        ):
            raise RuntimeError("events were given positions out of their batch's order")
        return positions

    def _drawing_insert_sql(
        self, connection: Connection, table: Table, names: tuple[str, ...]
    ) -> str:
        key = (table.name, names)
        sql = self._drawing_inserts.get(key)
        if sql is None:
            quote = connection.dialect.identifier_preparer.quote
            casts = [
                _ARRAY_CASTS.get(str(table.c[name].type.compile(connection.dialect)), "text[]")
                for name in names
            ]
            source = ", ".join(f"%(a{i})s::{cast}" for i, cast in enumerate(casts))
            columns = ", ".join(quote(name) for name in names)
            picked = ", ".join(f"v.{quote(name)}" for name in names)
            sql = self._drawing_inserts[key] = (
                f"INSERT INTO {quote(table.name)} (position, {columns}) "
                f"SELECT nextval('{self._sequence}'), {picked} "
                f"FROM unnest({source}) WITH ORDINALITY AS v({columns}, place) "
                "ORDER BY v.place RETURNING position, stream_id, version"
            )
        return sql

    def lock(self, connection: Connection, keys: Collection[str]) -> None:
        if keys:
            connection.execute(self._lock_keys, {"keys": sorted(set(keys))})

    def safe_head(self, connection: Connection, head: int) -> int:
        # The sequence first, then the markers: a writer takes its marker before it
        # draws, so every position drawn by the first read belongs to a writer
        # whose marker the second read sees, unless it has already ended.
        drawn = int(connection.execute(self._last_drawn).scalar() or 0)
        lowest = min(
            (_unwrapped(int(marker), drawn) for _, marker in connection.execute(self._markers)),
            default=drawn + 1,
        )
        return min(drawn, lowest - 1)

    def exclude_writers(self, connection: Connection) -> None:
        # Its own shared hold (taken at its opening) does not stand in its way.
        connection.execute(self._exclude_writers)


def _unwrapped(low_bits: int, drawn: int) -> int:
    """A marker's position from its low 32 bits: the one at or below `drawn + 1`
    (a marker is never further behind the sequence than 2**31 positions)."""
    ceiling = drawn + 1
    return ceiling - ((ceiling - low_bits) % (1 << 32))


class PostgresDialect(Dialect):
    """Arrays for batches of keys and bulk writes (COPY for large ones), row locks,
    the server's clock."""

    clock_is_local = False
    positions_from_a_sequence = True
    updates_at_versions = True

    def __init__(self) -> None:
        self._array_types: dict[type[TypeEngine[Any]], ARRAY[Any]] = {}
        self._insert_sql: dict[tuple[str, tuple[str, ...]], str] = {}
        self._update_sql: dict[tuple[str, str, tuple[str, ...]], Prepared] = {}
        self._update_from_sql: dict[tuple[str, str, tuple[str, ...]], str] = {}

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

    def each_of_bound(self, name: str, like: ColumnElement[Any]) -> TableValuedAlias:
        return (
            func.unnest(bindparam(name, type_=self.array_of(like.type)))
            .table_valued("value")
            .render_derived(name="wanted")
        )

    def is_one_of_bound(self, name: str, column: ColumnElement[Any]) -> ColumnElement[bool]:
        return column == any_(bindparam(name, type_=self.array_of(column.type)))

    def batch_value(self, values: Sequence[Any]) -> Any:
        return list(values)

    @contextlib.contextmanager
    def probing_indexes(self, connection: Connection) -> Iterator[None]:
        """For statements that touch a batch of keys in a growing table (the log,
        the jobs, the schedules). While the table's statistics lag its growth
        (until autovacuum next analyses it), the planner believes it small and
        reads all of it: a scan, or a hash join with the whole table, on every
        batch. Only for these statements, outside a log write (whose settings
        probe for all of it, but for what verify and replay compare or copy
        whole: `scanning_tables`). The switches get back the values they had,
        whoever set them.

        Not restored if a statement inside fails: PostgreSQL then refuses
        every statement until the transaction rolls back, which ends the
        settings too. In a log write they are off already (`write_settings`),
        so nothing is sent.
        """
        if connection.info.get(_PROBES_FOR_THE_TRANSACTION):
            yield
            return
        before = connection.exec_driver_sql(_SWITCHES_OFF).one()
        yield
        values = {name: before[index * 2] for index, name in enumerate(_PLANNER_SWITCHES)}
        connection.exec_driver_sql(_SWITCHES_BACK, values).close()

    def write_settings(self) -> tuple[ColumnElement[Any], ...]:
        """Set, for the rest of a log write's transaction, as its first statement
        reads the log head: the planner probes indexes (`probing_indexes` then
        sends nothing), a prepared statement's generic plan, made that way, is
        kept (planning was a third of a hot statement's time), and nothing is
        JIT-compiled (`_NO_JIT`)."""
        return tuple(
            func.set_config(name, value, True)
            for name, value in (*((n, "off") for n in _PLANNER_SWITCHES), _GENERIC_PLANS, _NO_JIT)
        )

    def write_settings_made(self, connection: Connection) -> None:
        connection.info[_PROBES_FOR_THE_TRANSACTION] = True

    def write_settings_ended(self, connection: Connection) -> None:
        connection.info.pop(_PROBES_FOR_THE_TRANSACTION, None)

    @contextlib.contextmanager
    def scanning_tables(self, connection: Connection) -> Iterator[None]:
        """The planner's own choices, scans and hash joins included, for the
        statements inside (in a log write, whose settings probe), until the
        transaction ends; each planned anew."""
        if not connection.info.get(_PROBES_FOR_THE_TRANSACTION):
            yield
            return
        connection.exec_driver_sql(_SWITCHES_ON).close()
        connection.info.pop(_PROBES_FOR_THE_TRANSACTION)
        yield

    def bulk_insert(
        self, connection: Connection, table: Table, rows: Sequence[dict[str, Any]]
    ) -> None:
        """One row: an INSERT (compiled once). A small batch: INSERT ... SELECT
        FROM unnest(arrays), one round trip whatever its size, below
        `COPY_FROM_ROWS`; from there COPY ... FROM STDIN, the fastest way in,
        whose start and end are a round trip each."""
        if not rows:
            return
        if len(rows) == 1:
            bulk.executemany_insert(connection, table, rows)
        elif len(rows) < COPY_FROM_ROWS or connection.dialect.is_async:
            self.insert_from_arrays(connection, table, rows)
        else:
            self.copy_rows(connection, table, rows)

    def insert_from_arrays(
        self, connection: Connection, table: Table, rows: Sequence[dict[str, Any]]
    ) -> None:
        """INSERT ... SELECT FROM unnest(arrays): one statement, one round trip."""
        names = tuple(rows[0])
        sql = self._arrays_insert_sql(connection, table, names)
        arrays = {f"a{i}": [row[name] for row in rows] for i, name in enumerate(names)}
        with bulk.driver_cursor(connection, sql) as cursor:
            cursor.execute(sql, arrays)

    def copy_rows(
        self, connection: Connection, table: Table, rows: Sequence[dict[str, Any]]
    ) -> None:
        """COPY ... FROM STDIN (a sync driver's): a round trip to start, one to end."""
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

    def _arrays_insert_sql(
        self, connection: Connection, table: Table, names: tuple[str, ...]
    ) -> str:
        key = (table.name, names)
        sql = self._insert_sql.get(key)
        if sql is None:
            quote = connection.dialect.identifier_preparer.quote
            source = ", ".join(
                f"%(a{i})s::{self._array_cast(connection, table, name)}"
                for i, name in enumerate(names)
            )
            columns = ", ".join(quote(name) for name in names)
            sql = self._insert_sql[key] = (
                f"INSERT INTO {quote(table.name)} ({columns}) SELECT * FROM unnest({source})"
            )
        return sql

    def _array_cast(self, connection: Connection, table: Table, name: str) -> str:
        """The array type a column's values travel in (text[] for text of any kind)."""
        column_type = str(table.c[name].type.compile(dialect=connection.dialect))
        return _ARRAY_CASTS.get(column_type, "text[]")

    def bulk_update(
        self, connection: Connection, table: Table, key_column: str, rows: Sequence[dict[str, Any]]
    ) -> None:
        if len(rows) == 1:
            # One row by its key's equality: an index probe, planned as one
            # whatever the planner's switches (built once per set of columns).
            (row,) = rows
            statement = self._update_one(table, key_column, tuple(row))
            statement.run(connection, **{f"v_{name}": value for name, value in row.items()})
            return
        # Left to itself, the planner hashed the whole table to join it with
        # the batch: 73 ms for 1,000 rows among 100,000 schedules, against
        # 17 ms probing.
        with self.probing_indexes(connection):
            for names, group in bulk.group_by_columns(rows).items():
                self._update_from_arrays(connection, table, key_column, names, group)

    def update_at_versions(
        self,
        connection: Connection,
        table: Table,
        key_column: str,
        rows: Sequence[dict[str, Any]],
        expected: Sequence[int],
    ) -> set[Any]:
        """UPDATE ... WHERE version = expected RETURNING the key: the compare-and-set
        and the write in one statement (per set of columns). Under READ COMMITTED
        a row another transaction changed meanwhile is checked again as it
        committed, so a version moved on is never overwritten."""
        if len(rows) == 1:
            (row,) = rows
            statement = self._update_one_at_version(table, key_column, tuple(row))
            values = {f"v_{name}": value for name, value in row.items()}
            return {key for (key,) in statement.run(connection, **values, expected=expected[0])}
        updated: set[Any] = set()
        groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for row, version in zip(rows, expected, strict=True):
            groups.setdefault(tuple(row), []).append({**row, _EXPECTED: version})
        with self.probing_indexes(connection):
            for names, group in groups.items():
                sql = self._update_from_unnest_sql(
                    connection, table, key_column, names, at_versions=True
                )
                arrays = {f"a{i}": [row[name] for row in group] for i, name in enumerate(names)}
                arrays["expected"] = [row[_EXPECTED] for row in group]
                with bulk.driver_cursor(connection, sql) as cursor:
                    cursor.execute(sql, arrays)
                    updated.update(key for (key,) in cursor.fetchall())
        return updated

    def _update_one_at_version(
        self, table: Table, key_column: str, names: tuple[str, ...]
    ) -> Prepared:
        key = (table.name, key_column, (*names, _EXPECTED))
        statement = self._update_sql.get(key)
        if statement is None:
            values: dict[str, Any] = {
                name: bindparam(f"v_{name}") for name in names if name != key_column
            }
            built = (
                update(table)
                .where(
                    table.c[key_column] == bindparam(f"v_{key_column}"),
                    table.c.version == bindparam("expected"),
                )
                .values(values)
                .returning(table.c[key_column])
            )
            statement = self._update_sql.setdefault(key, Prepared(built))
        return statement

    def _update_from_unnest_sql(
        self,
        connection: Connection,
        table: Table,
        key_column: str,
        names: tuple[str, ...],
        *,
        at_versions: bool,
    ) -> str:
        """UPDATE ... FROM unnest(arrays), its text made once per table and set of
        columns; `at_versions`: only where `version` is the row's expected one
        (one more array), returning the keys updated."""
        sql_key = (table.name, key_column, (*names, _EXPECTED) if at_versions else names)
        sql = self._update_from_sql.get(sql_key)
        if sql is None:
            quote = connection.dialect.identifier_preparer.quote
            casts = [self._array_cast(connection, table, name) for name in names]
            source = ", ".join(f"%(a{i})s::{cast}" for i, cast in enumerate(casts))
            columns = ", ".join(quote(name) for name in names)
            assignments = ", ".join(
                f"{quote(name)} = v.{quote(name)}" for name in names if name != key_column
            )
            key = quote(key_column)
            if at_versions:
                source += ", %(expected)s::integer[]"
                columns += f", {_EXPECTED}"
            sql = (
                f"UPDATE {quote(table.name)} AS t SET {assignments} "
                f"FROM unnest({source}) AS v({columns}) WHERE t.{key} = v.{key}"
            )
            if at_versions:
                sql += f" AND t.version = v.{_EXPECTED} RETURNING t.{key}"
            self._update_from_sql[sql_key] = sql
        return sql

    def _update_one(self, table: Table, key_column: str, names: tuple[str, ...]) -> Prepared:
        key = (table.name, key_column, names)
        statement = self._update_sql.get(key)
        if statement is None:
            values: dict[str, Any] = {
                name: bindparam(f"v_{name}") for name in names if name != key_column
            }
            built = update(table).where(table.c[key_column] == bindparam(f"v_{key_column}"))
            statement = self._update_sql.setdefault(key, Prepared(built.values(values)))
        return statement

    def _update_from_arrays(
        self,
        connection: Connection,
        table: Table,
        key_column: str,
        names: tuple[str, ...],
        rows: Sequence[dict[str, Any]],
    ) -> None:
        """One UPDATE ... FROM unnest(arrays) for all rows: one statement, not one per
        row."""
        sql = self._update_from_unnest_sql(connection, table, key_column, names, at_versions=False)
        arrays = {f"a{i}": [row[name] for row in rows] for i, name in enumerate(names)}
        with bulk.driver_cursor(connection, sql) as cursor:
            cursor.execute(sql, arrays)

    def locked(self, query: Select[Any], *, shared: bool = False) -> Select[Any]:
        return query.with_for_update(read=shared)

    def locked_skipping(self, query: Select[Any]) -> Select[Any]:
        return query.with_for_update(skip_locked=True)

    def log_order(self, head_table: str, sequence: str) -> LogOrder:
        return SequenceOrder(head_table, sequence)

    def first_of_each(self, table: Table, wanted: TableValuedAlias) -> Select[Any]:
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

    def insert_or_replace(
        self, table: Table, keys: Sequence[str], values: dict[str, Any]
    ) -> Insert:
        replaced = {name: value for name, value in values.items() if name not in keys}
        return (
            pg_dialect.insert(table)
            .values(values)
            .on_conflict_do_update(index_elements=list(keys), set_=replaced)
        )

    def commits_with_host(self, connection: Connection) -> bool:
        if connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
            return False
        return not getattr(connection.connection.dbapi_connection, "autocommit", False)

    def database_identity(self, connection: Connection) -> tuple[Any, ...]:
        """The database and schema on the server (its start time tells servers
        apart, however each connection reached it)."""
        return tuple(connection.execute(_IDENTITY).one())

    def raise_to(self, table: Table, keys: Sequence[str], column: str) -> Insert:
        statement = pg_dialect.insert(table)
        greater = func.greatest(table.c[column], statement.excluded[column])
        return statement.on_conflict_do_update(index_elements=list(keys), set_={column: greater})

    def server_now_ms(self, connection: Connection) -> int:
        return int(connection.execute(_SERVER_NOW_MS).scalar_one())

    def is_stream_version_conflict(self, detail: str) -> bool:
        return "uq_headgate_events_stream_version" in detail

    def is_tick_origin_conflict(self, detail: str) -> bool:
        return "ux_headgate_jobs_periodic_origin" in detail


class PostgresMaintenance(Maintenance):
    """The server checkpoints by itself; VACUUM after compaction; an advisory lock
    for migrations; ALTER renames in place."""

    renames_constraints = True

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
        connection.execute(_MIGRATION_LOCK)


class _PostgresListener(Listener):
    """LISTEN on a connection of its own (not the pool's), on a daemon thread that
    reconnects with back-off; a pooler in transaction mode cannot carry LISTEN,
    which is why workers can be set to poll only."""

    RECONNECT_MAX_S: Final = 30.0
    WAIT_S: Final = 0.25
    """How long a wait for notifications lasts before it checks for close()."""

    def __init__(self, url: URL, on_enqueued: Callable[[str | None], None]) -> None:
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


@compiles(code_point_order, NAME)
def _code_point_order_in_c(element: code_point_order, compiler: Any, **kw: Any) -> str:
    return f'{compiler.process(element.clauses, **kw)} COLLATE "C"'
