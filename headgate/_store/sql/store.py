"""The SQL store: the port's implementation on SQLite or PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from sqlalchemy import Engine

from headgate._clock import Clock
from headgate._errors import StoreClosed
from headgate._projections import ALL_PROJECTIONS, AnyProjection
from headgate._store.port import CompactionPolicy, CompactionReport, Fence, Listener, Store
from headgate._store.sql import compaction
from headgate._store.sql.activity import SqlActivityLog
from headgate._store.sql.backends import SqlBackend, backend_named
from headgate._store.sql.database import Database
from headgate._store.sql.engine import BUSY_TIMEOUT_S, parse_store_url, shown_url, translated_errors
from headgate._store.sql.handler_declarations import SqlHandlerDeclarations
from headgate._store.sql.leases import SqlLeases
from headgate._store.sql.log import SqlEventLog
from headgate._store.sql.migrations import (
    migrate,
    require_current,
    require_existing,
    require_revision,
    require_tables,
    schema_version,
)
from headgate._store.sql.projector import Projector
from headgate._store.sql.queries import SqlReads
from headgate._store.sql.schema import LIVE, LOG
from headgate._store.sql.sessions import SqlSessionRevocations
from headgate._store.sql.worker_rows import SqlWorkers


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
    activity: SqlActivityLog
    sessions: SqlSessionRevocations
    handlers: SqlHandlerDeclarations

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
        parsed = parse_store_url(url)
        if migrate_schema:
            backend_named(parsed.get_backend_name()).connector.check_openable(parsed)
        else:
            require_current(parsed)
        self.database = Database(parsed, clock, busy_timeout_s)
        if migrate_schema:
            migrate(self.database.engine)
        with translated_errors("reading the store's clock"), self.engine.connect() as connection:
            self.database.synchronise_clock(connection)
        self.projector = Projector(LIVE, projections)
        self.log = SqlEventLog(self.database, self.projector)
        self.leases = SqlLeases(self.database)
        self.workers = SqlWorkers(self.database)
        self.reads = SqlReads(self.database.engine)
        self.activity = SqlActivityLog(self.database)
        self.sessions = SqlSessionRevocations(self.database)
        self.handlers = SqlHandlerDeclarations(self.database)

    def __repr__(self) -> str:
        return f"SqlStore({shown_url(self.database.url)!r})"

    @property
    def engine(self) -> Engine:
        """The read pool's engine, for the adapter's maintenance code and for tests."""
        return self.database.engine

    @property
    def backend(self) -> SqlBackend:
        return self.database.backend

    def schema_revision(self) -> int:
        if self.database.closed:
            raise StoreClosed("reading the schema version: the store is closed")
        revision = schema_version(self.engine)
        require_revision(revision, shown_url(self.database.url))
        require_tables(self.engine, LOG, shown_url(self.database.url))
        return revision

    def listen(self, on_enqueued: Callable[[str | None], None]) -> Listener | None:
        return self.backend.connector.listen(self.database.url, on_enqueued)

    def compact(
        self,
        policy: CompactionPolicy | None = None,
        cancel: threading.Event | None = None,
        *,
        fence: Fence | None = None,
    ) -> CompactionReport:
        return compaction.compact(self.database, self.log, policy, cancel, fence=fence)

    def close(self) -> None:
        """See `Database.close`: a write in flight finishes first."""
        self.database.close()


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
