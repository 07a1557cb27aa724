"""Stores made before Headgate used Alembic, carried over into revision 1.

Those builds kept their tables without the `headgate_` prefix (`events`,
`jobs`, `schedules`, `leases`, ...), which collided with a host's own, and
recorded their version (1 to 6) in a `schema_migrations` table. Such a store
is recognised by that table's shape and first row (a host's own table of the
same name is left alone), brought to version 6 by the steps below, frozen as
those builds ran them, and then moved under the new names: renamed in place
on PostgreSQL (instant); on SQLite, which cannot rename a table's inline
constraints, copied into the tables revision 1 creates (about a second per
million events), the old tables dropped. `schema_migrations` stays, marked as
moved (so the old builds refuse the store), and Alembic records revision 1,
all in the caller's one transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from headgate._domain.events import EnqueueAttempted, RecordedEvent
from headgate._errors import SchemaTooNew
from headgate._store.mapper import decode, type_name
from headgate._store.sql.backends import backend_of

if TYPE_CHECKING:
    from alembic.operations import Operations

VERSION_TABLE: Final = "schema_migrations"
FIRST_DESCRIPTION: Final = "event log and log head"
"""How those stores describe version 1: a host's own `schema_migrations` does not."""
LAST_VERSION: Final = 6
MOVED_VERSION: Final = 7
MOVED_DESCRIPTION: Final = "moved to the headgate_ tables, versioned by Alembic"
TABLES: Final = (
    "events",
    "log_head",
    "projection_checkpoints",
    "leases",
    "compaction_state",
    "schedules",
    "jobs",
    "enqueue_history",
    "quarantine",
)
INDEXES: Final = (
    "ix_schedules_due_order",
    "ux_jobs_live_unique_key",
    "ix_jobs_queue_state",
    "ix_jobs_finished",
    "ix_enqueue_history_schedule",
)
NEW_PREFIX: Final = "headgate_"


def recorded_version(connection: Connection) -> int | None:
    """The version a store made before Alembic records, or None if this is not one."""
    inspector = sa.inspect(connection)
    if not inspector.has_table(VERSION_TABLE):
        return None
    columns = {column["name"] for column in inspector.get_columns(VERSION_TABLE)}
    if not {"version", "description", "applied_at_ms"} <= columns:
        return None  # the host's own table of that name
    first = connection.execute(
        sa.text(f"SELECT description FROM {VERSION_TABLE} WHERE version = 1")
    ).scalar()
    if first != FIRST_DESCRIPTION:
        return None
    latest = int(
        connection.execute(sa.text(f"SELECT max(version) FROM {VERSION_TABLE}")).scalar_one()
    )
    return None if latest == MOVED_VERSION else latest


def bring_to_last_version(connection: Connection, version: int) -> list[int]:
    """Run the steps a store at `version` missed, as those builds would have;
    returns them."""
    if version > LAST_VERSION:
        raise SchemaTooNew(
            f"the database schema is at version {version} of an older numbering this "
            f"Headgate does not know; upgrade Headgate"
        )
    steps = run_steps(connection, version + 1, LAST_VERSION)
    # The earliest builds' step 3 made leases only, and no later step added the
    # compaction state: a store of that line lacks it at any version.
    _compaction_state(_operations(connection))
    return steps


def _operations(connection: Connection) -> Operations:
    """Alembic's operations on this connection (Alembic loads only to migrate)."""
    from alembic.migration import MigrationContext  # noqa: PLC0415
    from alembic.operations import Operations  # noqa: PLC0415

    return Operations(MigrationContext.configure(connection))


def run_steps(connection: Connection, first: int, last: int) -> list[int]:
    """The steps `first` to `last`, each recorded in `schema_migrations`; returns them."""
    op = _operations(connection)
    for step in range(first, last + 1):
        STEPS[step](op)
        connection.execute(
            sa.text(
                f"INSERT INTO {VERSION_TABLE} (version, description, applied_at_ms) "
                "VALUES (:v, :d, 0)"
            ),
            {"v": step, "d": DESCRIPTIONS[step]},
        )
    return list(range(first, last + 1))


def rename_in_place(connection: Connection) -> None:
    """Where ALTER renames constraints (PostgreSQL): every table, index and
    constraint under its new name."""
    backend_of(connection).maintenance.rename_tables(
        connection,
        tables={table: NEW_PREFIX + table for table in TABLES},
        indexes={index: _prefixed(index) for index in (*INDEXES, "uq_events_stream_version")},
        checks={
            "ck_jobs_periodic_origin_pair": (
                f"{NEW_PREFIX}jobs",
                _prefixed("ck_jobs_periodic_origin_pair"),
            )
        },
    )
    _mark_moved(connection)


def _prefixed(name: str) -> str:
    """ix_jobs_finished -> ix_headgate_jobs_finished."""
    kind, _, rest = name.partition("_")
    return f"{kind}_{NEW_PREFIX}{rest}"


def _mark_moved(connection: Connection) -> None:
    """Record the move as version 7 of the old numbering: the builds before it check
    that table at start and refuse a store at a version they do not know, so an
    old host restarted after the upgrade stops instead of starting afresh on
    empty tables of the old names."""
    connection.execute(
        sa.text(
            f"INSERT INTO {VERSION_TABLE} (version, description, applied_at_ms) VALUES (:v, :d, 0)"
        ),
        {"v": MOVED_VERSION, "d": MOVED_DESCRIPTION},
    )


def copy_into_new_tables(connection: Connection) -> None:
    """SQLite, once revision 1 has made the new tables: every row copied over, the
    old tables dropped."""
    for table in TABLES:
        columns = ", ".join(column["name"] for column in sa.inspect(connection).get_columns(table))
        connection.exec_driver_sql(f"DELETE FROM {NEW_PREFIX}{table}")  # revision 1's own rows
        connection.exec_driver_sql(
            f"INSERT INTO {NEW_PREFIX}{table} ({columns}) SELECT {columns} FROM {table}"
        )
        connection.exec_driver_sql(f"DROP TABLE {table}")
    _mark_moved(connection)


# The steps, frozen as those builds ran them -------------------------------------


def _event_log(op: Operations) -> None:
    op.create_table(
        "events",
        sa.Column("position", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("stream_id", sa.String(255), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("schema_version", sa.SmallInteger, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("recorded_at_ms", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("stream_id", "version", name="uq_events_stream_version"),
    )
    log_head = op.create_table(
        "log_head",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(log_head, [{"id": 1, "position": 0}])


def _projections(op: Operations) -> None:
    checkpoints = op.create_table(
        "projection_checkpoints",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("rebuilding", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "schedules",
        sa.Column("schedule_id", sa.String(255), primary_key=True),
        sa.Column("spec", sa.String(512), nullable=False),
        sa.Column("kind", sa.String(128), nullable=False),
        sa.Column("queue", sa.String(128), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("on_missed", sa.String(16), nullable=False),
        sa.Column("backfill_limit", sa.Integer, nullable=False),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("next_run_ms", sa.BigInteger, nullable=False),
        sa.Column("due_at_ms", sa.BigInteger, nullable=False),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("last_enqueued_ms", sa.BigInteger),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("deleted", sa.Boolean, nullable=False),
        sa.Column("updated_at_ms", sa.BigInteger, nullable=False),
    )
    op.create_index(
        "ix_schedules_due",
        "schedules",
        ["due_at_ms"],
        sqlite_where=sa.text("NOT paused AND NOT deleted"),
        postgresql_where=sa.text("NOT paused AND NOT deleted"),
    )
    op.create_table(
        "jobs",
        sa.Column("job_id", sa.String(255), primary_key=True),
        sa.Column("kind", sa.String(128), nullable=False),
        sa.Column("queue", sa.String(128), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("unique_key", sa.String(255)),
        sa.Column("created_at_ms", sa.BigInteger, nullable=False),
        sa.Column("updated_at_ms", sa.BigInteger, nullable=False),
        sa.Column("periodic_schedule_id", sa.String(255)),
        sa.Column("periodic_tick_ms", sa.BigInteger),
        sa.CheckConstraint(
            "(periodic_schedule_id IS NULL) = (periodic_tick_ms IS NULL)",
            name="ck_jobs_periodic_origin_pair",
        ),
    )
    op.create_index(
        "ux_jobs_live_unique_key",
        "jobs",
        ["unique_key"],
        unique=True,
        sqlite_where=sa.text("state = 'pending' AND unique_key IS NOT NULL"),
        postgresql_where=sa.text("state = 'pending' AND unique_key IS NOT NULL"),
    )
    op.create_index("ix_jobs_queue_state", "jobs", ["queue", "state"])
    op.create_table(
        "enqueue_history",
        sa.Column("event_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("schedule_id", sa.String(255), nullable=False),
        sa.Column("tick_ms", sa.BigInteger, nullable=False),
        sa.Column("job_id", sa.String(255), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("recorded_at_ms", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_enqueue_history_schedule", "enqueue_history", ["schedule_id", "event_id"])
    op.create_table(
        "quarantine",
        sa.Column("fingerprint", sa.String(128), primary_key=True),
        sa.Column("note", sa.String(255), nullable=False),
        sa.Column("quarantined_at_ms", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(
        checkpoints,
        [
            {"name": name, "position": 0, "rebuilding": False}
            for name in ("schedules", "jobs", "enqueue_history", "quarantine")
        ],
    )


def _leases_and_compaction(op: Operations) -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("holder", sa.String(128), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("term", sa.BigInteger, nullable=False),
        sa.Column("acquired_at_ms", sa.BigInteger, nullable=False),
        sa.Column("expires_at_ms", sa.BigInteger, nullable=False),
    )
    _compaction_state(op)


def _compaction_state(op: Operations) -> None:
    """Made by step 3 (the earliest builds' step 3 made leases only: see step 6)."""
    if sa.inspect(op.get_bind()).has_table("compaction_state"):
        return
    table = op.create_table(
        "compaction_state",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(table, [{"id": 1, "position": 0}])


def _due_order(op: Operations) -> None:
    """The due read orders by (due_at_ms, schedule_id); indexing both lets it stop
    after one batch instead of sorting every due schedule on each sweep."""
    op.execute("DROP INDEX IF EXISTS ix_schedules_due")
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_schedules_due_order "
        "ON schedules (due_at_ms, schedule_id) WHERE NOT paused AND NOT deleted"
    )


def _finished_jobs(op: Operations) -> None:
    """Compaction looks for jobs finished before a time; without this it scanned
    every job, pending ones included, on every run."""
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_jobs_finished "
        "ON jobs (updated_at_ms) WHERE state <> 'pending'"
    )


HISTORY_BATCH: Final = 5_000
_events = sa.table(
    "events",
    sa.column("position", sa.BigInteger),
    sa.column("stream_id", sa.String),
    sa.column("version", sa.Integer),
    sa.column("type", sa.String),
    sa.column("schema_version", sa.SmallInteger),
    sa.column("body", sa.Text),
    sa.column("recorded_at_ms", sa.BigInteger),
)
_history = sa.table(
    "enqueue_history",
    sa.column("event_id", sa.BigInteger),
    sa.column("schedule_id", sa.String),
    sa.column("tick_ms", sa.BigInteger),
    sa.column("job_id", sa.String),
    sa.column("outcome", sa.String),
    sa.column("reason", sa.String),
    sa.column("attempt", sa.Integer),
    sa.column("recorded_at_ms", sa.BigInteger),
)
_checkpoints = sa.table(
    "projection_checkpoints", sa.column("name", sa.String), sa.column("position", sa.BigInteger)
)


def _history_for_every_attempt(op: Operations) -> None:
    """Compaction removes an attempt's event and its history row together. Before,
    each write trimmed the history to the newest 100 rows per schedule while the
    log could hold more: fold those attempts back in, up to where the history
    projection has got (a rebuild under way folds the rest itself). Also makes
    sure the compaction state exists (see step 3)."""
    _compaction_state(op)
    connection = op.get_bind()
    reached = connection.execute(
        sa.select(_checkpoints.c.position).where(_checkpoints.c.name == "enqueue_history")
    ).scalar_one()
    after = 0
    while True:
        missing = connection.execute(
            sa.select(_events)
            .outerjoin(
                _history,
                # Bounded in the join too: a merge anti-join would otherwise read
                # the history from its first row for every batch.
                sa.and_(_history.c.event_id == _events.c.position, _history.c.event_id > after),
            )
            .where(
                _events.c.type == type_name(EnqueueAttempted),
                _events.c.position > after,
                _events.c.position <= reached,
                _history.c.event_id.is_(None),
            )
            .order_by(_events.c.position)
            .limit(HISTORY_BATCH)
        ).all()
        if not missing:
            return
        connection.execute(sa.insert(_history), [_history_row(row) for row in missing])
        after = missing[-1].position


def _history_row(row: sa.Row[tuple[object, ...]]) -> dict[str, object]:
    recorded = RecordedEvent(
        row.position,
        row.stream_id,
        row.version,
        row.recorded_at_ms,
        decode(row.type, row.schema_version, row.body),
    )
    attempt = recorded.event
    assert isinstance(attempt, EnqueueAttempted)
    return {
        "event_id": recorded.position,
        "schedule_id": attempt.schedule_id,
        "tick_ms": attempt.tick_ms,
        "job_id": attempt.job_id,
        "outcome": attempt.outcome.value,
        "reason": attempt.reason,
        "attempt": attempt.attempt,
        "recorded_at_ms": recorded.recorded_at_ms,
    }


STEPS: Final[dict[int, Callable[[Operations], None]]] = {
    1: _event_log,
    2: _projections,
    3: _leases_and_compaction,
    4: _due_order,
    5: _finished_jobs,
    6: _history_for_every_attempt,
}
DESCRIPTIONS: Final = {
    1: FIRST_DESCRIPTION,
    2: "projection tables and checkpoints",
    3: "leases and compaction state",
    4: "due index ordered by (due_at_ms, schedule_id)",
    5: "index of finished jobs for compaction",
    6: "enqueue history rows for every attempt in the log",
}


def create_at_version(connection: Connection, version: int) -> None:
    """A new store in the layout of legacy `version` (for upgrade tests): the
    steps up to it, and its `schema_migrations`."""
    connection.exec_driver_sql(
        f"CREATE TABLE {VERSION_TABLE} (version INTEGER NOT NULL PRIMARY KEY, "
        "description VARCHAR(255) NOT NULL, applied_at_ms BIGINT NOT NULL)"
    )
    run_steps(connection, 1, version)
