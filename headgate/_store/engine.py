"""Engines for the two supported stores, and driver-error translation.

SQLite (`sqlite:///path.db`) is the embedded default: WAL so readers never
block the writer, a busy timeout so writers queue instead of failing, and
`synchronous=FULL` so an acknowledged commit survives a power cut. Write
transactions start with BEGIN IMMEDIATE, taking the write lock up front, so a
read-then-write transaction can never be overtaken.

PostgreSQL (`postgresql+psycopg://...`) is the shared store for several hosts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Final

from sqlalchemy import Engine, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.pool import StaticPool

from headgate._errors import (
    ConcurrencyConflict,
    ConstraintViolation,
    StoreError,
    StoreUnavailable,
)

BUSY_TIMEOUT_S: Final = 30.0
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
WRITE: Final = {"headgate_write": True}
"""Execution options marking a connection's transaction as a write."""


def parse_store_url(url: str) -> URL:
    """Validate a store URL; plain `postgresql://` means the psycopg 3 driver."""
    try:
        parsed = make_url(url)
    except (sa_exc.ArgumentError, ValueError):
        raise ValueError(f"store URL: {url!r} is not a database URL") from None
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        if parsed.drivername not in ("postgresql", "postgresql+psycopg"):
            raise ValueError(
                f"store URL: driver {parsed.get_driver_name()!r} is not supported; "
                "use postgresql:// (psycopg 3)"
            )
        return parsed.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        if parsed.drivername not in ("sqlite", "sqlite+pysqlite"):
            raise ValueError(
                f"store URL: driver {parsed.get_driver_name()!r} is not supported; "
                "use sqlite:///path.db"
            )
        if not parsed.database or parsed.database == ":memory:":
            raise ValueError(
                "store URL: an in-memory SQLite database cannot be shared; use sqlite:///path.db"
            )
        if parsed.query:
            raise ValueError(
                f"store URL: SQLite takes no options here ({', '.join(parsed.query)}); "
                "Headgate sets its own"
            )
        return parsed
    raise ValueError(
        f"store URL: {backend!r} is not supported; use sqlite:///path.db or postgresql://"
    )


def create_store_engine(
    url: str, busy_timeout_s: float = BUSY_TIMEOUT_S, *, single_connection: bool = False
) -> Engine:
    """An engine for `url`. `single_connection` (SQLite): one connection, reused
    by every caller, for a process's serialised writes (see EventStore)."""
    parsed = parse_store_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, busy_timeout_s, single_connection=single_connection)
    engine = create_engine(
        parsed,
        pool_pre_ping=True,
        pool_size=10,
        max_overflow=10,
        pool_timeout=busy_timeout_s,
        connect_args=POSTGRES_CONNECT_ARGS,
    )

    @event.listens_for(engine, "connect")
    def _session_limits(dbapi_connection: Any, _record: Any) -> None:
        # A process frozen mid-transaction (GC pause, SIGSTOP) must not hold the
        # log head or the lease row forever: the server ends such a session,
        # rolling its transaction back, so a standby can take over.
        cursor = dbapi_connection.cursor()
        cursor.execute(f"SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS}")
        cursor.execute(f"SET lock_timeout = {int(busy_timeout_s * 1000)}")
        # psycopg prepares a statement after a few runs, and PostgreSQL may then
        # reuse a generic plan chosen while a table was still empty: a sequential
        # scan that never goes away as the table grows. Plan each execution.
        cursor.execute("SET plan_cache_mode = force_custom_plan")
        cursor.close()
        dbapi_connection.commit()
        # Arrays (the hot path's `= ANY(...)` and unnest parameters) go in
        # binary: the text form quotes and checks each element in Python, which
        # cost about a microsecond per id and column of every tick. (Imported
        # here: a SQLite-only host need not load libpq.)
        from psycopg.types.array import ListBinaryDumper  # noqa: PLC0415 (see above)

        dbapi_connection.adapters.register_dumper(list, ListBinaryDumper)

    return engine


SQLITE_PAGE_SIZE: Final = 16_384


def _sqlite_engine(url: URL, busy_timeout_s: float, *, single_connection: bool) -> Engine:
    engine = create_engine(
        url,
        connect_args={"timeout": busy_timeout_s, "check_same_thread": False},
        **({"poolclass": StaticPool} if single_connection else {}),
    )

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the sqlite3 module; see "begin".
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        # Only a new, empty database takes a page size (and only before WAL mode
        # is set); an existing one keeps its own (README: how to convert one).
        # With 16 KiB pages a batch of ticks dirties fewer pages: measured on a
        # store with long histories, about a fifth less time per tick than 4 KiB.
        cursor.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")
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


@contextlib.contextmanager
def write_transaction(engine: Engine, where: str) -> Iterator[Connection]:
    """A connection inside a write transaction (BEGIN IMMEDIATE on SQLite)."""
    with (
        translated_errors(where),
        engine.execution_options(**WRITE).connect() as connection,
        connection.begin(),
    ):
        yield connection


def is_postgresql(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


@contextlib.contextmanager
def translated_errors(where: str) -> Iterator[None]:
    """Re-raise driver errors as Headgate's own, keeping the original as the cause."""
    try:
        yield
    except StoreError:
        raise
    except sa_exc.IntegrityError as error:
        detail = _first_line(error)
        if "uq_events_stream_version" in detail or "events.stream_id, events.version" in detail:
            raise ConcurrencyConflict(None, None, None) from error
        raise ConstraintViolation(f"{where}: a constraint rejected the write: {detail}") from error
    except (
        sa_exc.OperationalError,
        sa_exc.InterfaceError,
        sa_exc.TimeoutError,
        sa_exc.DisconnectionError,
    ) as error:
        raise StoreUnavailable(f"{where}: store unavailable: {_first_line(error)}") from error
    except sa_exc.DBAPIError as error:
        raise StoreError(f"{where}: store error: {_first_line(error)}") from error
    except sa_exc.SQLAlchemyError as error:
        raise StoreError(f"{where}: {_first_line(error)}") from error


def _first_line(error: sa_exc.SQLAlchemyError) -> str:
    original = getattr(error, "orig", None)
    text = str(original if original is not None else error).strip()
    return text.splitlines()[0] if text else type(error).__name__
