"""Schema migrations: Alembic revisions, applied when a store opens.

Each revision in `versions/` states its own DDL, frozen when it was written:
editing `schema.py` never changes what an earlier revision creates (a test
compares a database migrated from the first revision with `schema.py`).
Revisions are numbered 1, 2, 3, ... (revision ids "0001", "0002", ...) and
form one line. Headgate keeps its own version table, `headgate_alembic_version`,
so it never touches a host's own Alembic history in a shared database.

The whole upgrade runs in one write transaction (SQLite and PostgreSQL both
have transactional DDL), so a crash mid-upgrade leaves the previous version
intact; concurrent starts are serialised (SQLite's write lock; an advisory
lock on PostgreSQL). A store made before Headgate used Alembic (its version
in `schema_migrations`, its tables unprefixed) is carried over into revision
1 first: `legacy.py`.

To add a revision: copy the newest file in `versions/`, give it the next
number as `revision` and the newest as `down_revision`, write its DDL with
`alembic.op` (never from `schema.py`'s objects), change `schema.py` to match,
and name a new index last in `INDEX_ORDER`.

A new store (an empty database) is not made revision by revision but at the
newest at once, from `schema.py` (`_create_at_head`); a test compares the two
ways, tables, indexes, their order and rows.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Final

from sqlalchemy import Engine, MetaData, func, insert, inspect, select, text
from sqlalchemy.engine import URL, Connection
from sqlalchemy.schema import CreateSequence, CreateTable

from headgate._errors import SchemaBehind, SchemaIncomplete, SchemaTooNew, StoreNotFound
from headgate._logs import get_logger
from headgate._projections import ALL_PROJECTIONS
from headgate._store.port import SCHEMA_REVISION
from headgate._store.sql.backends import backend_named, backend_of
from headgate._store.sql.engine import shown_url, translated_errors, write_transaction
from headgate._store.sql.migrations import legacy
from headgate._store.sql.schema import (
    LOG,
    POSITIONS,
    TABLE_PREFIX,
    compaction_state,
    log_head,
    projection_checkpoints,
)

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = [
    "LATEST_VERSION",
    "VERSION_TABLE",
    "migrate",
    "require_current",
    "require_existing",
    "require_revision",
    "require_tables",
    "revision_id",
    "schema_version",
]

VERSION_TABLE: Final = "headgate_alembic_version"
LATEST_VERSION: Final = SCHEMA_REVISION
"""The newest revision in versions/ (a test checks the two agree)."""
HERE: Final = Path(__file__).parent
ALEMBIC_LOGGERS: Final = ("alembic.runtime.migration", "alembic.runtime.plugins")
"""Alembic narrates every run at INFO ("Context impl ...", "Will assume
non-transactional DDL", which is not so here); Headgate logs one line instead."""
log = get_logger("headgate")


def revision_id(version: int) -> str:
    return f"{version:04d}"


def revisions_on_disk() -> list[int]:
    """Every revision in versions/, as Alembic reads them."""
    from alembic.script import ScriptDirectory  # noqa: PLC0415 (Alembic loads only to migrate)

    return sorted(
        int(revision.revision) for revision in ScriptDirectory(str(HERE)).walk_revisions()
    )


def _config(connection: Connection) -> Config:
    from alembic.config import Config  # noqa: PLC0415 (as above)

    config = Config()
    config.set_main_option("script_location", str(HERE))
    config.attributes["connection"] = connection
    return config


def migrate(engine: Engine, target: int = LATEST_VERSION) -> list[int]:
    """Bring the schema up to revision `target`; returns the revisions applied now
    (a store carried over from before Alembic counts as applying revision 1)."""
    with write_transaction(engine, "migrating the schema") as connection:
        backend_of(engine).maintenance.lock_for_migration(connection)
        current = _current_version(connection)
        applied: list[int] = []
        if current is None:
            current = _carry_over_legacy_store(connection)
            applied = [1] if current else []
            if not current and target == LATEST_VERSION and not _has_headgate_tables(connection):
                _create_at_head(connection)
                log.info("store created", revision=revision_id(target))
                return list(range(1, target + 1))
        if current >= target:
            return applied
        with _alembic() as command:
            command.upgrade(_config(connection), revision_id(target))
        log.info("store schema migrated", revision=revision_id(target))
        return [*applied, *range(current + 1, target + 1)]


class _BelowWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


@contextlib.contextmanager
def _alembic() -> Iterator[ModuleType]:
    """Alembic's commands, with its INFO narration dropped (see ALEMBIC_LOGGERS)."""
    quiet = _BelowWarning()
    loggers = [logging.getLogger(name) for name in ALEMBIC_LOGGERS]
    for logger in loggers:
        logger.addFilter(quiet)
    try:
        from alembic import command  # noqa: PLC0415 (Alembic loads only to migrate)

        yield command
    finally:
        for logger in loggers:
            logger.removeFilter(quiet)


def schema_version(engine: Engine) -> int:
    """The store's revision (0 for an empty database or one from before Alembic)."""
    with translated_errors("reading the schema version"), engine.connect() as connection:
        return _current_version(connection) or 0


def require_current(url: URL) -> None:
    """For what only reads a store: the URL must hold one, at this Headgate's
    revision. Looks through a read-only connection and changes nothing: no
    file, table or migration is made. Raises StoreNotFound, SchemaBehind,
    SchemaTooNew, or StoreUnavailable."""
    require_revision(require_existing(url), shown_url(url))


def require_existing(url: URL) -> int:
    """The revision of the store the URL holds (0: from before Alembic), looked
    up as `require_current` does, changing nothing; StoreNotFound when there is
    none (for commands, where a mistyped URL must not become a new store)."""
    backend = backend_named(url.get_backend_name())
    shown = shown_url(url)
    if backend.connector.is_missing(url):
        raise StoreNotFound(f"no Headgate store at {shown}")
    engine = backend.connector.inspecting_engine(url)
    try:
        with translated_errors("reading the schema version"), engine.connect() as connection:
            current = _current_version(connection)
            if current is None and legacy.recorded_version(connection) is None:
                raise StoreNotFound(f"no Headgate store at {shown}")
    finally:
        engine.dispose()
    return current or 0  # a store from before Alembic is at 0


def require_revision(current: int, shown: str) -> None:
    """SchemaBehind unless `current` is this Headgate's revision (a newer one
    never gets here: reading it raised SchemaTooNew)."""
    if current < LATEST_VERSION:
        raise SchemaBehind(
            f"the store at {shown} is at schema revision {revision_id(current)}, "
            f"behind this Headgate's {revision_id(LATEST_VERSION)}; a command that only "
            "reads migrates nothing: run one that migrates (headgate serve, headgate "
            "projections rebuild, or Headgate(url) in code), then this again"
        )


def require_tables(engine: Engine, metadata: MetaData, shown: str) -> None:
    """Every table of `metadata` there, and each column of each one readable, in
    one statement (a row at most of each): what serving needs, beyond the
    revision, which a table dropped by hand leaves as it was. SchemaIncomplete
    names the tables missing; a table there but unreadable (a column missing,
    no privilege) is the driver's error, translated."""
    with translated_errors("reading the store's tables"), engine.connect() as connection:
        missing = sorted(set(metadata.tables) - set(inspect(connection).get_table_names()))
        if missing:
            raise SchemaIncomplete(
                f"the store at {shown} lacks the table(s) {', '.join(missing)} of its "
                f"schema revision {revision_id(LATEST_VERSION)}: restore the store from a "
                "backup (a migration does not make them again at the same revision)"
            )
        probes = [
            select(func.count())
            .select_from(select(*table.columns).limit(1).subquery())
            .scalar_subquery()
            for table in metadata.sorted_tables
        ]
        connection.execute(select(*probes)).one()


def _current_version(connection: Connection) -> int | None:
    """The revision Alembic recorded, or None if it has recorded none."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    rows = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    if not rows:
        return None
    (stored,) = rows  # one line of revisions: one head
    known = {revision_id(version): version for version in range(1, LATEST_VERSION + 1)}
    if stored not in known:
        raise SchemaTooNew(
            f"the database schema is at revision {stored!r}, which this Headgate does not "
            f"know (it knows up to {revision_id(LATEST_VERSION)}); upgrade Headgate"
        )
    return known[stored]


INDEX_ORDER: Final = (
    "ix_headgate_jobs_queue_state",
    "ix_headgate_enqueue_history_schedule",
    "ux_headgate_jobs_live_unique_key",
    "ix_headgate_jobs_created",
    "ix_headgate_jobs_running",
    "ix_headgate_job_attempts_job",
    "ix_headgate_jobs_state_created",
    "ix_headgate_jobs_schedule_created",
    "ix_headgate_jobs_run_now",
    "ix_headgate_schedules_due_order",
    "ix_headgate_schedules_declared",
    "ix_headgate_schedules_undeclared",
    "ix_headgate_schedules_listed",
    "ix_headgate_jobs_finished",
    "ix_headgate_jobs_claimable",
    "ix_headgate_rate_starts",
    "ix_headgate_enqueue_history_recorded",
    "ix_headgate_job_attempts_ended",
    "ix_headgate_jobs_partition_turns",
    "ix_headgate_jobs_start_by",
    "ix_headgate_revoked_sessions_expires",
    "ix_headgate_schedules_live_specs",
    "ix_headgate_schedule_runs_schedule",
    "ix_headgate_schedule_runs_waiting",
    "ix_headgate_jobs_unique_key",
    "ix_headgate_jobs_kind_state",
    "ux_headgate_jobs_periodic_origin",
    "ix_headgate_jobs_live_ticks",
)
"""Every index of `schema.py`, in the order the revisions, applied in turn, make
them: a new store is made with them in this order (see `_create_at_head`); a
revision that adds an index adds it here, last (a test compares)."""


def _has_headgate_tables(connection: Connection) -> bool:
    return any(name.startswith(TABLE_PREFIX) for name in inspect(connection).get_table_names())


def _create_at_head(connection: Connection) -> None:
    """A new store, made at the newest revision at once: `schema.py`'s tables and
    the rows the revisions would have left (the log head, the compaction
    state, a checkpoint per projection), then the revision stamped. What every
    revision in turn makes of an empty database is the same (a test compares
    the two, tables, indexes and rows): this is the same store in a fraction of
    the statements (PostgreSQL spent 0.6 s a store on 140 DDL statements). The
    indexes are made in the order the revisions made them (`INDEX_ORDER`):
    both planners break a tie between two indexes of one cost (no statistics
    yet) by it, and the query-plan tests hold the plans they chose."""
    for table in LOG.sorted_tables:
        connection.execute(CreateTable(table))
    indexes = {str(index.name): index for table in LOG.sorted_tables for index in table.indexes}
    for name in INDEX_ORDER:
        indexes[name].create(connection)
    if backend_of(connection).dialect.positions_from_a_sequence:
        connection.execute(CreateSequence(POSITIONS))
    connection.execute(insert(log_head).values(id=1, position=0, rebuilding=False))
    connection.execute(insert(compaction_state).values(id=1, position=0))
    connection.execute(
        insert(projection_checkpoints),
        [
            {"name": projection.name, "position": 0, "rebuilding": False}
            for projection in ALL_PROJECTIONS
        ],
    )
    with _alembic() as command:
        command.stamp(_config(connection), revision_id(LATEST_VERSION))


def _carry_over_legacy_store(connection: Connection) -> int:
    """A store from before Alembic, moved into revision 1 (see legacy.py); returns
    the revision it is at now: 1, or 0 if there was none."""
    version = legacy.recorded_version(connection)
    if version is None:
        return 0
    with _alembic() as command:
        legacy.bring_to_last_version(connection, version)
        if backend_of(connection).maintenance.renames_constraints:
            legacy.rename_in_place(connection)
            command.stamp(_config(connection), revision_id(1))
        else:
            command.upgrade(_config(connection), revision_id(1))
            legacy.copy_into_new_tables(connection)
    log.info("store carried over from before Alembic", legacy_version=version, revision="0001")
    return 1
