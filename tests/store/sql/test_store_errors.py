"""Driver errors become Headgate's own errors at the adapter edge; each mapping tested."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import insert, text

from headgate._errors import (
    ConcurrencyConflict,
    ConstraintViolation,
    StoreError,
    StoreUnavailable,
)
from headgate._store.port import NO_STREAM
from headgate._store.sql.engine import parse_store_url, translated_errors
from headgate._store.sql.schema import LIVE, events
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from tests.store.builders import defined

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
        connection.execute(text("SELECT no_such_column FROM headgate_events"))


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
    dialect = store.backend.dialect
    with (
        pytest.raises(ConcurrencyConflict),
        translated_errors("test"),
        store.engine.begin() as connection,
    ):
        dialect.bulk_insert(
            connection, events, [{**EVENT_ROW, "position": 1}, {**EVENT_ROW, "position": 2}]
        )
    with (
        pytest.raises(ConstraintViolation),
        translated_errors("test"),
        store.engine.begin() as connection,
    ):
        dialect.bulk_insert(connection, LIVE.jobs, [JOB_ROW])
        dialect.bulk_update(
            connection, LIVE.jobs, "job_id", [{"job_id": "j", "periodic_tick_ms": 5}]
        )
