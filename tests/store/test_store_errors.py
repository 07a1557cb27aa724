"""Driver errors become Headgate's own errors at the adapter edge; each mapping tested."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import Engine, delete, func, insert, inspect, select, text, update

from headgate._errors import (
    ConcurrencyConflict,
    ConstraintViolation,
    SchemaTooNew,
    StoreError,
    StoreUnavailable,
)
from headgate._store.port import NO_STREAM
from headgate._store.sql.engine import create_store_engine, parse_store_url, translated_errors
from headgate._store.sql.maintenance import rebuild, verify
from headgate._store.sql.migrations import LATEST_VERSION, migrate, schema_version
from headgate._store.sql.schema import LIVE, LOG, events, projection_checkpoints, schema_migrations
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from tests.conftest import POSTGRES_URL, drop_postgres_schema, fresh_postgres_url
from tests.store.builders import create_schedule, defined, fire_tick

EVENT_ROW = {
    "stream_id": "s",
    "version": 1,
    "type": "ScheduleDeleted",
    "schema_version": 1,
    "body": "{}",
    "recorded_at_ms": 1,
}
"""An events row without its position."""
JOB_ROW = {
    "job_id": "j",
    "kind": "k",
    "queue": "q",
    "payload": "{}",
    "state": "pending",
    "unique_key": None,
    "created_at_ms": 1,
    "updated_at_ms": 1,
    "periodic_schedule_id": None,
    "periodic_tick_ms": None,
}


def test_unreachable_postgresql_is_store_unavailable() -> None:
    with pytest.raises(StoreUnavailable, match="store unavailable"):
        SqlStore("postgresql+psycopg://postgres@127.0.0.1:1/nowhere", FakeClock())


def test_locked_sqlite_past_busy_timeout_is_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    store = SqlStore(f"sqlite:///{path}", FakeClock(), busy_timeout_s=0.2)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreUnavailable, match="database is locked"):
            store.log.append("schedule-a", NO_STREAM, [defined("a")])
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    store.log.append("schedule-a", NO_STREAM, [defined("a")])
    store.close()


def test_duplicate_stream_version_is_a_concurrency_conflict(store: SqlStore) -> None:
    with (
        pytest.raises(ConcurrencyConflict),
        translated_errors("test"),
        store.engine.begin() as connection,
    ):
        connection.execute(insert(events).values(position=1, **EVENT_ROW))
        connection.execute(insert(events).values(position=2, **EVENT_ROW))


def test_check_constraint_is_a_constraint_violation(store: SqlStore) -> None:
    half_origin = {**JOB_ROW, "periodic_schedule_id": "s"}
    with (
        pytest.raises(ConstraintViolation, match="constraint"),
        translated_errors("test"),
        store.engine.begin() as connection,
    ):
        connection.execute(insert(LIVE.jobs).values(**half_origin))


def test_other_driver_errors_are_store_errors(store: SqlStore) -> None:
    with pytest.raises(StoreError), translated_errors("test"), store.engine.begin() as connection:
        connection.execute(text("SELECT no_such_column FROM events"))


def test_a_newer_schema_is_refused(store_url: str, store: SqlStore) -> None:
    with store.engine.begin() as connection:
        connection.execute(
            insert(schema_migrations).values(version=999, description="future", applied_at_ms=1)
        )
    with pytest.raises(SchemaTooNew, match="version 999"):
        SqlStore(store_url, FakeClock())


def test_migrations_are_idempotent_and_versioned(store: SqlStore) -> None:
    assert schema_version(store.engine) == LATEST_VERSION
    assert migrate(store.engine, 0) == []


def test_upgrade_keeps_existing_events(store_url: str) -> None:

    engine = create_store_engine(store_url)
    assert migrate(engine, 0, target=1) == [1]
    with engine.begin() as connection:
        connection.execute(
            insert(events).values(
                position=1,
                stream_id="schedule-a",
                version=1,
                type="ScheduleDeleted",
                schema_version=1,
                body='{"schedule_id":"a"}',
                recorded_at_ms=5,
            )
        )
    engine.dispose()
    upgraded = SqlStore(store_url, FakeClock())
    try:
        assert schema_version(upgraded.engine) == LATEST_VERSION
        assert [e.stream_id for e in upgraded.log.read_all()] == ["schedule-a"]
    finally:
        upgraded.close()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://x/y", "'mysql' is not supported"),
        ("sqlite://", "in-memory SQLite database cannot be shared"),
        ("not a url", "is not a database URL"),
    ],
)
def test_bad_store_urls_are_rejected_clearly(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_store_url(url)


def test_plain_postgresql_urls_use_psycopg() -> None:
    assert parse_store_url("postgresql://u@h/db").drivername == "postgresql+psycopg"


def test_bulk_path_errors_are_translated_too(store: SqlStore) -> None:
    backend = store.backend
    with (
        pytest.raises(ConcurrencyConflict),
        translated_errors("test"),
        store.engine.begin() as connection,
    ):
        backend.bulk_insert(
            connection, events, [{**EVENT_ROW, "position": 1}, {**EVENT_ROW, "position": 2}]
        )
    with (
        pytest.raises(ConstraintViolation),
        translated_errors("test"),
        store.engine.begin() as connection,
    ):
        backend.bulk_insert(connection, LIVE.jobs, [JOB_ROW])
        backend.bulk_update(
            connection, LIVE.jobs, "job_id", [{"job_id": "j", "periodic_tick_ms": 5}]
        )


def test_upgrade_orders_the_due_index_by_schedule_too(store_url: str) -> None:
    engine = create_store_engine(store_url)
    assert migrate(engine, 0, target=3) == [1, 2, 3]
    with engine.begin() as connection:  # the index as version 3 created it
        connection.execute(text("DROP INDEX ix_schedules_due_order"))
        connection.execute(
            text(
                "CREATE INDEX ix_schedules_due ON schedules (due_at_ms) "
                "WHERE NOT paused AND NOT deleted"
            )
        )
    assert migrate(engine, 0, target=4) == [4]
    indexes = {ix["name"]: ix["column_names"] for ix in inspect(engine).get_indexes("schedules")}
    engine.dispose()
    assert "ix_schedules_due" not in indexes
    assert indexes["ix_schedules_due_order"] == ["due_at_ms", "schedule_id"]


def test_upgrade_indexes_finished_jobs_for_compaction(store_url: str) -> None:
    engine = create_store_engine(store_url)
    assert migrate(engine, 0, target=4) == [1, 2, 3, 4]
    with engine.begin() as connection:  # the jobs table as version 4 left it
        connection.execute(text("DROP INDEX ix_jobs_finished"))
    assert migrate(engine, 0, target=5) == [5]
    indexes = {ix["name"]: ix["column_names"] for ix in inspect(engine).get_indexes("jobs")}
    engine.dispose()
    assert indexes["ix_jobs_finished"] == ["updated_at_ms"]


def test_upgrade_gives_every_attempt_in_the_log_its_history_row(store_url: str) -> None:
    """Until version 6 each write trimmed the history to the newest 100 rows per
    schedule, though the log could hold more; now a rebuild makes a row for
    every attempt in the log, and so must the live table, or verify fails."""
    store = SqlStore(store_url, FakeClock())
    create_schedule(store, "busy")
    for tick in range(1, 131):
        fire_tick(store, "busy", tick * 1000, interval_ms=1000)
    history = LIVE.enqueue_history
    with store.engine.begin() as connection:  # as the trim on every write left it
        oldest = select(history.c.event_id).order_by(history.c.event_id).limit(30)
        connection.execute(delete(history).where(history.c.event_id.in_(oldest.scalar_subquery())))
        connection.execute(delete(schema_migrations).where(schema_migrations.c.version == 6))
    assert not verify(store).ok
    assert migrate(store.engine, 0) == [6]
    with store.engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(history)).scalar_one() == 130
    assert verify(store).ok
    store.close()


def test_upgrade_during_a_history_rebuild_leaves_the_rest_to_it(store_url: str) -> None:
    """A rebuild under way has folded the history up to its checkpoint: the
    migration fills in only below that, and the resumed rebuild does the rest."""
    store = SqlStore(store_url, FakeClock())
    create_schedule(store, "busy")
    for tick in range(1, 131):
        fire_tick(store, "busy", tick * 1000, interval_ms=1000)
    history, checkpoints = LIVE.enqueue_history, projection_checkpoints
    midway = store.log.head() // 2
    with store.engine.begin() as connection:  # an interrupted rebuild, trimmed as before
        oldest = select(history.c.event_id).order_by(history.c.event_id).limit(10)
        connection.execute(delete(history).where(history.c.event_id.in_(oldest.scalar_subquery())))
        connection.execute(delete(history).where(history.c.event_id > midway))
        connection.execute(
            update(checkpoints)
            .where(checkpoints.c.name == "enqueue_history")
            .values(position=midway, rebuilding=True)
        )
        connection.execute(delete(schema_migrations).where(schema_migrations.c.version == 6))
    assert migrate(store.engine, 0) == [6]
    with store.engine.connect() as connection:
        rows = connection.execute(select(history.c.event_id)).scalars().all()
    assert rows and max(rows) <= midway
    assert rebuild(store, ["enqueue_history"]).resumed == ["enqueue_history"]
    assert verify(store).ok
    store.close()


def _shape(engine: Engine) -> dict[str, object]:
    inspector = inspect(engine)
    return {
        table: (
            [(c["name"], c["nullable"]) for c in inspector.get_columns(table)],
            sorted(
                (i["name"], tuple(i["column_names"]), i["unique"])
                for i in inspector.get_indexes(table)
            ),
            sorted(tuple(u["column_names"]) for u in inspector.get_unique_constraints(table)),
        )
        for table in sorted(inspector.get_table_names())
    }


def test_migrating_step_by_step_gives_the_schema_the_code_describes(
    store_url: str, tmp_path: Path
) -> None:
    migrated = create_store_engine(store_url)
    for version in range(1, LATEST_VERSION + 1):
        assert migrate(migrated, 0, target=version) == [version]
    schema = None
    if store_url.startswith("sqlite"):
        described_url = f"sqlite:///{tmp_path / 'described.db'}"
    else:
        described_url, schema = fresh_postgres_url(POSTGRES_URL)
    described = create_store_engine(described_url)
    try:
        LOG.create_all(described)
        assert _shape(migrated) == _shape(described)
    finally:
        migrated.dispose()
        described.dispose()
        if schema is not None:
            drop_postgres_schema(POSTGRES_URL, schema)
