"""Versioned schema migrations, applied on start.

Each migration runs once, in order, inside one transaction together with the
row that records it (both SQLite and PostgreSQL have transactional DDL), so a
crash mid-upgrade leaves the previous version intact. Concurrent starts are
serialised (SQLite's write lock; an advisory lock on PostgreSQL). Migrations
only add; none drops or rewrites stored data.

When a table's shape changes, add a migration that alters it; never edit what
an earlier migration creates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from sqlalchemy import Engine, and_, func, insert, select, text
from sqlalchemy.engine import Connection

from headgate._domain.events import EnqueueAttempted
from headgate._errors import SchemaTooNew
from headgate._projections import ALL_PROJECTIONS, ENQUEUE_HISTORY
from headgate._store.mapper import type_name
from headgate._store.sql.backends import backend_of
from headgate._store.sql.engine import translated_errors, write_transaction
from headgate._store.sql.event_rows import decode_row
from headgate._store.sql.projector import fold_into_table
from headgate._store.sql.schema import (
    DUE_INDEX_WHERE,
    FINISHED_JOBS_WHERE,
    LIVE,
    compaction_state,
    events,
    leases,
    log_head,
    projection_checkpoints,
    schema_migrations,
)


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[Connection], None]


def _create_event_log(connection: Connection) -> None:
    events.create(connection)
    log_head.create(connection)
    connection.execute(insert(log_head).values(id=1, position=0))


def _create_projections(connection: Connection) -> None:
    projection_checkpoints.create(connection)
    for table in LIVE.all():
        table.create(connection)
    connection.execute(
        insert(projection_checkpoints),
        [{"name": p.name, "position": 0, "rebuilding": False} for p in ALL_PROJECTIONS],
    )


def _create_leases_and_compaction(connection: Connection) -> None:
    leases.create(connection)
    compaction_state.create(connection)
    connection.execute(insert(compaction_state).values(id=1, position=0))


def _index_due_order(connection: Connection) -> None:
    """The due read orders by (due_at_ms, schedule_id); indexing both lets it stop
    after one batch instead of sorting every due schedule on each sweep."""
    connection.execute(text("DROP INDEX IF EXISTS ix_schedules_due"))
    connection.execute(
        text(
            "CREATE INDEX IF NOT EXISTS ix_schedules_due_order "
            f"ON schedules (due_at_ms, schedule_id) WHERE {DUE_INDEX_WHERE}"
        )
    )


def _index_finished_jobs(connection: Connection) -> None:
    """Compaction looks for jobs finished before a time; without this it scanned
    every job, pending ones included, on every run."""
    connection.execute(
        text(
            "CREATE INDEX IF NOT EXISTS ix_jobs_finished "
            f"ON jobs (updated_at_ms) WHERE {FINISHED_JOBS_WHERE}"
        )
    )


BACKFILL_BATCH: Final = 5_000


def _history_for_every_attempt(connection: Connection) -> None:
    """The enqueue history now has a row for every attempt still in the log
    (compaction removes both together). Before, each write trimmed the table to
    the newest 100 per schedule while the log could hold more: fold those back
    in, up to where the history projection has got (a rebuild under way folds
    the rest itself)."""
    history = LIVE.enqueue_history
    reached = connection.execute(
        select(projection_checkpoints.c.position).where(
            projection_checkpoints.c.name == ENQUEUE_HISTORY.name
        )
    ).scalar_one()
    after = 0
    while True:
        missing = connection.execute(
            select(events)
            .outerjoin(
                history,
                # Bounded in the join too: a merge anti-join would otherwise read
                # the history from its first row for every batch.
                and_(history.c.event_id == events.c.position, history.c.event_id > after),
            )
            .where(
                events.c.type == type_name(EnqueueAttempted),
                events.c.position > after,
                events.c.position <= reached,
                history.c.event_id.is_(None),
            )
            .order_by(events.c.position)
            .limit(BACKFILL_BATCH)
        ).all()
        if not missing:
            return
        recorded = [decode_row(row) for row in missing]
        fold_into_table(connection, ENQUEUE_HISTORY, history, recorded)
        after = recorded[-1].position


MIGRATIONS: Final = (
    Migration(1, "event log and log head", _create_event_log),
    Migration(2, "projection tables and checkpoints", _create_projections),
    Migration(3, "leases and compaction state", _create_leases_and_compaction),
    Migration(4, "due index ordered by (due_at_ms, schedule_id)", _index_due_order),
    Migration(5, "index of finished jobs for compaction", _index_finished_jobs),
    Migration(6, "enqueue history rows for every attempt in the log", _history_for_every_attempt),
)
LATEST_VERSION: Final = MIGRATIONS[-1].version


def migrate(engine: Engine, clock_ms: int, target: int = LATEST_VERSION) -> list[int]:
    """Bring the schema up to `target`; returns the versions applied now."""
    applied: list[int] = []
    with write_transaction(engine, "migrating the schema") as connection:
        backend_of(engine).lock_for_migration(connection)
        schema_migrations.create(connection, checkfirst=True)
        current = connection.execute(select(func.max(schema_migrations.c.version))).scalar()
        current = current or 0
        if current > LATEST_VERSION:
            raise SchemaTooNew(
                f"the database schema is at version {current}, but this Headgate "
                f"knows only up to {LATEST_VERSION}; upgrade Headgate"
            )
        for migration in MIGRATIONS:
            if current < migration.version <= target:
                migration.apply(connection)
                connection.execute(
                    insert(schema_migrations).values(
                        version=migration.version,
                        description=migration.description,
                        applied_at_ms=clock_ms,
                    )
                )
                applied.append(migration.version)
    return applied


def schema_version(engine: Engine) -> int:
    with translated_errors("reading the schema version"), engine.connect() as connection:
        if not engine.dialect.has_table(connection, schema_migrations.name):
            return 0
        return int(connection.execute(select(func.max(schema_migrations.c.version))).scalar() or 0)
