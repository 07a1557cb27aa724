"""The schema migrations build exactly what the code describes, on both backends,
and carry an existing store (unprefixed tables, versioned before Alembic) over
in place."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Index,
    Integer,
    MetaData,
    create_engine,
    delete,
    func,
    insert,
    inspect,
    select,
    text,
    update,
)

from headgate._domain.decisions import Candidate
from headgate._domain.events import (
    ConcurrencyLimitSet,
    JobAbandoned,
    JobCancelled,
    JobClaimed,
    JobEnqueued,
    JobRetried,
    JobSucceeded,
)
from headgate._domain.limits import scope_of
from headgate._domain.options import JobOptions
from headgate._domain.served import Serving
from headgate._domain.streams import job_stream, limit_stream
from headgate._errors import (
    ConstraintViolation,
    DuplicateTickJobs,
    ProjectionsRebuilding,
    SchemaTooNew,
)
from headgate._store.port import NO_STREAM, JobFilter, WorkerBeat
from headgate._store.sql.backends import backend_of
from headgate._store.sql.engine import create_store_engine, translated_errors
from headgate._store.sql.maintenance import rebuild, verify
from headgate._store.sql.migrations import (
    INDEX_ORDER,
    LATEST_VERSION,
    VERSION_TABLE,
    migrate,
    revision_id,
    revisions_on_disk,
    schema_version,
)
from headgate._store.sql.migrations import legacy as legacy_steps
from headgate._store.sql.schema import LIVE, LOG, events, projection_checkpoints
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from tests.conftest import drop_postgres_schema, fresh_postgres_url
from tests.store.builders import create_schedule, defined, enqueued, fire_tick
from tests.store.snapshots import snapshot
from tests.store.sql.legacy import legacy, make_legacy_store
from tests.store.sql.schema_shape import differences, schema_shape


def _stamp_as_before(connection: Connection, revision: str) -> None:
    """Stamp the store at an earlier revision, its log head as a store written
    then would have it (`_head_as_before`)."""
    connection.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '{revision}'"))
    _head_as_before(connection)


def _head_as_before(connection: Connection) -> None:
    """Before revision 26 the log head row held the last position on PostgreSQL
    too (a sequence hands them out now, and the row is not moved)."""
    connection.execute(
        text(
            "UPDATE headgate_log_head SET position ="
            " (SELECT coalesce(max(position), 0) FROM headgate_events) WHERE id = 1"
        )
    )


@pytest.fixture
def fresh_url(
    store_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[[], str]]:
    """Makes more empty databases on the same backend as `store_url`."""
    made: list[str] = []

    def make() -> str:
        if store_url.startswith("sqlite"):
            made.append(str(len(made)))
            return f"sqlite:///{tmp_path / f'fresh-{len(made)}.db'}"
        url, schema = fresh_postgres_url(request.getfixturevalue("postgres_server_url"))
        made.append(schema)
        return url

    yield make
    if not store_url.startswith("sqlite"):
        for schema in made:
            drop_postgres_schema(request.getfixturevalue("postgres_server_url"), schema)


def _described_by(metadata: MetaData, url: str) -> dict[str, object]:
    engine = create_store_engine(url)
    try:
        metadata.create_all(engine)
        return schema_shape(engine)
    finally:
        engine.dispose()


def _migrated_step_by_step(url: str) -> Engine:
    engine = create_store_engine(url)
    for version in range(1, LATEST_VERSION + 1):
        assert migrate(engine, target=version) == [version]
    return engine


def _without_version_table(shape: dict[str, object]) -> dict[str, object]:
    return {table: part for table, part in shape.items() if table != VERSION_TABLE}


def test_a_store_migrated_from_the_first_revision_has_exactly_the_described_schema(
    store_url: str, fresh_url: Callable[[], str]
) -> None:
    """Column types, nullability and defaults, keys, unique and check constraints,
    index columns and partial-index predicates, with their names."""
    engine = _migrated_step_by_step(store_url)
    try:
        migrated = _without_version_table(schema_shape(engine))
    finally:
        engine.dispose()
    assert differences(migrated, _described_by(LOG, fresh_url())) == []


def test_a_new_store_made_at_once_is_the_store_every_revision_makes_in_turn(
    store_url: str, fresh_url: Callable[[], str]
) -> None:
    """An empty database is made at the newest revision in one go (schema.py's
    tables, the rows the revisions leave, the stamp): the same tables, indexes,
    constraints and rows as every revision applied in turn, and a store that
    then migrates as any other."""
    stepped = _migrated_step_by_step(store_url)
    at_once = create_store_engine(fresh_url())
    try:
        assert migrate(at_once) == list(range(1, LATEST_VERSION + 1))
        assert migrate(at_once) == []
        assert differences(schema_shape(at_once), schema_shape(stepped)) == []
        assert _rows_of_every_table(at_once) == _rows_of_every_table(stepped)
    finally:
        stepped.dispose()
        at_once.dispose()


def test_a_new_store_makes_its_indexes_in_the_order_the_revisions_do(
    store_url: str, fresh_url: Callable[[], str]
) -> None:
    """A planner with no statistics breaks ties between indexes by their order,
    so a store made at once must plan as one made step by step."""
    stepped = _migrated_step_by_step(store_url)
    at_once = create_store_engine(fresh_url())
    try:
        migrate(at_once)
        assert _index_order(stepped) == list(INDEX_ORDER)
        assert _index_order(at_once) == list(INDEX_ORDER)
    finally:
        stepped.dispose()
        at_once.dispose()


def _index_order(engine: Engine) -> list[str]:
    """The store's indexes (not those of its keys and unique constraints), oldest first."""
    query = (
        "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY rowid"
        if engine.dialect.name == "sqlite"
        else "SELECT c.relname FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace LEFT JOIN pg_constraint k "
        "ON k.conindid = c.oid WHERE n.nspname = current_schema() AND k.oid IS NULL "
        "ORDER BY c.oid"
    )
    with engine.connect() as connection:
        return [str(name) for (name,) in connection.exec_driver_sql(query)]


def _rows_of_every_table(engine: Engine) -> dict[str, list[tuple[object, ...]]]:
    with engine.connect() as connection:
        return {
            name: sorted(tuple(row) for row in connection.execute(text(f'SELECT * FROM "{name}"')))
            for name in sorted(inspect(connection).get_table_names())
            if name.startswith("headgate_")
        }


def test_the_comparison_fails_on_a_change_with_no_migration(
    store_url: str, fresh_url: Callable[[], str]
) -> None:
    """What a schema.py edit without a revision would look like: a column, an
    index predicate and a nullability that the migrations never made."""
    edited = MetaData()
    for table in LOG.sorted_tables:
        table.to_metadata(edited)
    jobs = edited.tables[LIVE.jobs.name]
    jobs.append_column(Column("weight", Integer, nullable=False, server_default="0"))
    for index in list(jobs.indexes):
        if index.name == f"ix_{LIVE.jobs.name}_finished":
            jobs.indexes.discard(index)
    Index(
        f"ix_{LIVE.jobs.name}_finished",
        jobs.c.updated_at_ms,
        sqlite_where=text("state = 'x'"),
        postgresql_where=text("state = 'x'"),
    )
    edited.tables[LIVE.schedules.name].c.spec.nullable = True
    engine = _migrated_step_by_step(store_url)
    try:
        migrated = _without_version_table(schema_shape(engine))
    finally:
        engine.dispose()
    found = differences(migrated, _described_by(edited, fresh_url()))
    assert any(line.startswith(f"{LIVE.jobs.name}.columns") and "weight" in line for line in found)
    assert any(line.startswith(f"{LIVE.jobs.name}.indexes") and "'x'" in line for line in found)
    assert any(line.startswith(f"{LIVE.schedules.name}.columns") for line in found)


def _busy(store: SqlStore) -> None:
    create_schedule(store, "a")
    create_schedule(store, "b", next_run_ms=120_000)
    for tick in (60_000, 120_000, 180_000):
        fire_tick(store, "a", tick)
    fire_tick(store, "b", 120_000)


@pytest.mark.parametrize("version", [6, 3])
def test_an_existing_store_is_carried_over_in_place(
    store_url: str, fresh_url: Callable[[], str], version: int
) -> None:
    """A store as a build before Alembic left it: its version in
    `schema_migrations`, tables without the prefix. Opening it runs the steps it
    missed, renames (or on SQLite copies) every table, keeps every row, and
    records revision 1: exactly the described schema. `schema_migrations` stays,
    at version 7, which the builds before refuse (they know up to 6)."""
    current = SqlStore(fresh_url(), FakeClock())
    try:
        _busy(current)
        expected_events = current.log.read_all(0, 10_000)
        expected_rows = snapshot(current.engine)
        make_legacy_store(store_url, version=version, copy_from=current)
    finally:
        current.close()
    upgraded = SqlStore(store_url, FakeClock())
    try:
        tables = set(inspect(upgraded.engine).get_table_names())
        expected_tables = {table.name for table in LOG.sorted_tables}
        assert tables == expected_tables | {VERSION_TABLE, "schema_migrations"}
        with upgraded.engine.connect() as connection:
            stamped = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).all()
            legacy_marks = connection.exec_driver_sql(
                "SELECT max(version), count(*) FROM schema_migrations"
            ).one()
            assert legacy_steps.recorded_version(connection) is None  # nothing left to carry
        assert stamped == [(revision_id(LATEST_VERSION),)]
        assert tuple(legacy_marks) == (7, 7)
        assert upgraded.log.read_all(0, 10_000) == expected_events
        assert snapshot(upgraded.engine) == expected_rows
        assert verify(upgraded).ok
        shape = _without_version_table(schema_shape(upgraded.engine))
        shape.pop("schema_migrations")
        described = _described_by(LOG, fresh_url())
        assert differences(shape, described) == []
        upgraded.log.append("schedule-c", NO_STREAM, [defined("c")])  # and it writes on
        assert upgraded.reads.schedule("c") is not None
    finally:
        upgraded.close()


def test_a_hosts_own_tables_of_the_old_names_are_left_alone(store_url: str) -> None:
    """A host's database with its own `events` and a Rails-style `schema_migrations`:
    Headgate starts beside them and touches neither."""
    engine = create_store_engine(store_url)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE events (id INTEGER PRIMARY KEY, what TEXT)")
        connection.exec_driver_sql("INSERT INTO events VALUES (1, 'the host''s')")
        connection.exec_driver_sql("CREATE TABLE schema_migrations (version VARCHAR(32))")
        connection.exec_driver_sql("INSERT INTO schema_migrations VALUES ('20240101')")
    engine.dispose()
    store = SqlStore(store_url, FakeClock())
    try:
        store.log.append("schedule-a", NO_STREAM, [defined("a")])
        with store.engine.connect() as connection:
            assert connection.exec_driver_sql("SELECT what FROM events").all() == [("the host's",)]
            assert connection.exec_driver_sql("SELECT version FROM schema_migrations").all() == [
                ("20240101",)
            ]
            assert connection.execute(select(LIVE.schedules.c.schedule_id)).scalars().all() == ["a"]
    finally:
        store.close()


def test_a_newer_schema_is_refused(store_url: str, store: SqlStore) -> None:
    with store.engine.begin() as connection:
        connection.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '0999'"))
    with pytest.raises(SchemaTooNew, match="revision '0999'"):
        SqlStore(store_url, FakeClock())


def test_a_newer_legacy_numbering_is_refused(store_url: str) -> None:
    make_legacy_store(store_url, version=6)
    engine = create_store_engine(store_url)
    with engine.begin() as connection:
        connection.exec_driver_sql(
            "INSERT INTO schema_migrations VALUES (999, 'from the future', 0)"
        )
    engine.dispose()
    with pytest.raises(SchemaTooNew, match="version 999"):
        SqlStore(store_url, FakeClock())


def test_migrations_are_idempotent_and_versioned(store: SqlStore) -> None:
    assert schema_version(store.engine) == LATEST_VERSION
    assert migrate(store.engine) == []


def test_stores_opened_at_once_migrate_one_schema_once(
    fresh_url: Callable[[], str],
) -> None:
    url = fresh_url()
    engines = [create_store_engine(url) for _ in range(3)]
    start = threading.Barrier(len(engines))
    applied: list[list[int]] = []

    def open_it(engine: Engine) -> None:
        start.wait()
        applied.append(migrate(engine))

    threads = [threading.Thread(target=open_it, args=(engine,)) for engine in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    try:
        assert sorted(applied, key=len) == [[], [], list(range(1, LATEST_VERSION + 1))]
        assert schema_version(engines[0]) == LATEST_VERSION
    finally:
        for engine in engines:
            engine.dispose()


def test_a_migration_waits_only_for_one_of_its_own_schema(
    store_url: str, fresh_url: Callable[[], str]
) -> None:
    """PostgreSQL: the migration lock is the schema's; a store in another schema of
    the same database opens while one is held, one in the same schema waits."""
    if store_url.startswith("sqlite"):
        pytest.skip("a SQLite store is a file of its own")
    held_url, other_url = fresh_url(), fresh_url()
    holder = create_engine(held_url)  # no idle-in-transaction timeout: it holds the lock
    opened: list[str] = []

    def open_store(url: str, name: str) -> threading.Thread:
        def run() -> None:
            SqlStore(url, FakeClock()).close()
            opened.append(name)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    try:
        with holder.begin() as connection:
            backend_of(holder).maintenance.lock_for_migration(connection)
            open_store(other_url, "other").join(timeout=10)
            assert opened == ["other"], "a store of another schema waited for this one's lock"
            waiting = open_store(held_url, "held")
            waiting.join(timeout=1.0)
            assert opened == ["other"], "a store of the held schema opened under its lock"
        waiting.join(timeout=30)
        assert opened == ["other", "held"]
    finally:
        holder.dispose()


def test_upgrade_keeps_existing_events(store_url: str) -> None:
    make_legacy_store(store_url, version=1)
    engine = create_store_engine(store_url)
    with engine.begin() as connection:
        connection.execute(
            insert(legacy(events)).values(
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


def _legacy_indexes(
    url: str, version: int, then_step: int, table: str
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Index columns of a legacy table at `version`, and after legacy step `then_step`."""
    engine = create_store_engine(url)
    try:
        with engine.begin() as connection:
            legacy_steps.create_at_version(connection, version)
            before = {
                ix["name"]: ix["column_names"] for ix in inspect(connection).get_indexes(table)
            }
            assert legacy_steps.run_steps(connection, then_step, then_step) == [then_step]
            after = {
                ix["name"]: ix["column_names"] for ix in inspect(connection).get_indexes(table)
            }
        return before, after
    finally:
        engine.dispose()


def test_upgrade_orders_the_due_index_by_schedule_too(store_url: str) -> None:
    before, indexes = _legacy_indexes(store_url, 3, 4, "schedules")
    assert before["ix_schedules_due"] == ["due_at_ms"]  # the index as version 3 created it
    assert "ix_schedules_due" not in indexes
    assert indexes["ix_schedules_due_order"] == ["due_at_ms", "schedule_id"]


def test_upgrade_indexes_finished_jobs_for_compaction(store_url: str) -> None:
    before, indexes = _legacy_indexes(store_url, 4, 5, "jobs")
    assert "ix_jobs_finished" not in before
    assert indexes["ix_jobs_finished"] == ["updated_at_ms"]


def _legacy_store_with_a_long_history(
    store_url: str, fresh_url: Callable[[], str], version: int = 5
) -> int:
    """A store at legacy `version` with 130 attempts in the log (its history is
    trimmed by the caller, as those builds did); returns the log head."""
    current = SqlStore(fresh_url(), FakeClock())
    try:
        create_schedule(current, "busy")
        for tick in range(1, 131):
            fire_tick(current, "busy", tick * 1000, interval_ms=1000)
        head = current.log.head()
        make_legacy_store(store_url, version=version, copy_from=current)
    finally:
        current.close()
    return head


@pytest.mark.parametrize("recorded", [5, 6])
def test_upgrade_gives_every_attempt_in_the_log_its_history_row(
    store_url: str, fresh_url: Callable[[], str], recorded: int
) -> None:
    """Until version 6 each write trimmed the history to the newest 100 rows per
    schedule, though the log could hold more; now a rebuild makes a row for
    every attempt in the log, and so must the live table, or verify fails.
    (Recorded as at 6 already, step 6 does not run: verify sees the gap.)"""
    _legacy_store_with_a_long_history(store_url, fresh_url, version=recorded)
    history = legacy(LIVE.enqueue_history)
    engine = create_store_engine(store_url)
    with engine.begin() as connection:  # as the trim on every write left it
        oldest = select(history.c.event_id).order_by(history.c.event_id).limit(30)
        connection.execute(delete(history).where(history.c.event_id.in_(oldest.scalar_subquery())))
        assert connection.execute(select(func.count()).select_from(history)).scalar_one() == 100
    engine.dispose()
    store = SqlStore(store_url, FakeClock())
    try:
        with store.engine.connect() as connection:
            count = select(func.count()).select_from(LIVE.enqueue_history)
            assert connection.execute(count).scalar_one() == (130 if recorded == 5 else 100)
        assert verify(store).ok is (recorded == 5)
    finally:
        store.close()


def test_upgrade_during_a_history_rebuild_leaves_the_rest_to_it(
    store_url: str, fresh_url: Callable[[], str]
) -> None:
    """A rebuild under way has folded the history up to its checkpoint: the
    migration fills in only below that, and the resumed rebuild does the rest."""
    midway = _legacy_store_with_a_long_history(store_url, fresh_url) // 2
    history, checkpoints = legacy(LIVE.enqueue_history), legacy(projection_checkpoints)
    engine = create_store_engine(store_url)
    with engine.begin() as connection:  # an interrupted rebuild, trimmed as before
        oldest = select(history.c.event_id).order_by(history.c.event_id).limit(10)
        connection.execute(delete(history).where(history.c.event_id.in_(oldest.scalar_subquery())))
        connection.execute(delete(history).where(history.c.event_id > midway))
        connection.execute(
            update(checkpoints)
            .where(checkpoints.c.name == "enqueue_history")
            .values(position=midway, rebuilding=True)
        )
    engine.dispose()
    store = SqlStore(store_url, FakeClock())
    try:
        with store.engine.connect() as connection:
            rows = connection.execute(select(LIVE.enqueue_history.c.event_id)).scalars().all()
        assert rows and max(rows) <= midway
        assert rebuild(store, ["enqueue_history"]).resumed == ["enqueue_history"]
        assert verify(store).ok
    finally:
        store.close()


def test_the_latest_revision_is_the_newest_file_in_versions() -> None:
    assert revisions_on_disk() == list(range(1, LATEST_VERSION + 1))


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6])
def test_a_legacy_store_at_any_version_reaches_the_described_schema(
    store_url: str, fresh_url: Callable[[], str], version: int
) -> None:
    """Including the earliest line, whose step 3 made no compaction state."""
    make_legacy_store(store_url, version=version)
    if version >= 3:
        engine = create_store_engine(store_url)
        with engine.begin() as connection:
            connection.exec_driver_sql("DROP TABLE compaction_state")
        engine.dispose()
    engine = create_store_engine(store_url)
    try:
        assert migrate(engine) == list(range(1, LATEST_VERSION + 1))
        shape = _without_version_table(schema_shape(engine))
        shape.pop("schema_migrations")
        assert differences(shape, _described_by(LOG, fresh_url())) == []
    finally:
        engine.dispose()


def _job_row(job_id: str, tick_ms: int | None, created_at_ms: int) -> dict[str, object]:
    return {
        "job_id": job_id,
        "kind": "k",
        "queue": "default",
        "payload": "{}",
        "state": "completed",
        "created_at_ms": created_at_ms,
        "updated_at_ms": created_at_ms,
        "periodic_schedule_id": None if tick_ms is None else "nightly",
        "periodic_tick_ms": tick_ms,
    }


def test_revision_4_reports_ticks_with_two_jobs_and_changes_nothing(store_url: str) -> None:
    """A revision-3 store where an enqueue credited a tick the scheduler had fired:
    the upgrade names each such tick with its jobs (oldest first) and stops, in
    one transaction, at revision 3; once the extra job is gone it goes through."""
    engine = create_store_engine(store_url)
    try:
        migrate(engine, target=3)
        jobs = LIVE.jobs
        with engine.begin() as connection:
            connection.execute(
                insert(jobs),
                [
                    _job_row("tick-job", 60_000, 1),
                    _job_row("extra-job", 60_000, 2),
                    _job_row("other-tick", 120_000, 3),
                    _job_row("unlinked-1", None, 4),
                    _job_row("unlinked-2", None, 5),
                ],
            )
        with pytest.raises(DuplicateTickJobs) as refused:
            migrate(engine)
        assert refused.value.duplicates == [("nightly", 60_000, ["tick-job", "extra-job"])]
        message = str(refused.value)
        assert "schedule 'nightly' tick 60000: jobs tick-job, extra-job" in message
        assert "stays at revision 0003" in message and "headgate jobs cancel" in message
        assert schema_version(engine) == 3
        assert "ux_headgate_jobs_periodic_origin" not in {
            index["name"] for index in inspect(engine).get_indexes("headgate_jobs")
        }
        with engine.begin() as connection:
            connection.execute(delete(jobs).where(jobs.c.job_id == "extra-job"))
        assert migrate(engine) == list(range(4, LATEST_VERSION + 1))
        with (
            pytest.raises(ConstraintViolation, match=r"each tick has one job"),
            translated_errors("inserting"),
            engine.begin() as connection,
        ):
            connection.execute(insert(jobs), [_job_row("again", 60_000, 6)])
    finally:
        engine.dispose()


def test_revision_6_keeps_the_heartbeats_of_earlier_builds_on_the_ttl_rule(
    store_url: str,
) -> None:
    """A worker row written before its process identity existed reads back with
    none: no worker can prove its process dead, so only its expiry rescues it."""
    engine = create_store_engine(store_url)
    try:
        migrate(engine, target=5)
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO headgate_workers (worker_id, host, pid, queues, started_at_ms,"
                    " heartbeat_at_ms, expires_at_ms, running, overdue)"
                    " VALUES ('vm:4242:ab12cd34', 'vm', 4242, '{\"q\": 2}', 1000, 5000, 15000, 1, 0)"
                )
            )
        assert migrate(engine, target=6) == [6]
    finally:
        engine.dispose()
    clock = FakeClock(10_000)
    store = SqlStore(store_url, clock)
    try:
        (row,) = store.workers.live(10_000)
        assert (row.worker_id, row.pid, dict(row.queues), row.running) == (
            "vm:4242:ab12cd34",
            4242,
            {"q": 2},
            1,
        )
        assert row.process is None
        with store.log.write() as transaction:
            assert transaction.expired_workers(transaction.now_ms) == []
        clock.set(15_000)
        with store.log.write() as transaction:
            assert [w.worker_id for w in transaction.expired_workers(15_000)] == [row.worker_id]
    finally:
        store.close()


def test_revision_8_adds_the_rows_of_retries_already_folded(store_url: str) -> None:
    """A store whose job_attempts folded retries before they made a row gains the
    rows a rebuild would make, so the live table and a rebuild still agree."""
    clock = FakeClock(1_000)
    store = SqlStore(store_url, clock)
    try:
        store.log.append(job_stream("j"), NO_STREAM, [enqueued("j", "k", "q", None)])
        store.log.append(job_stream("j"), 1, [JobClaimed("j", "w", 1, 9_000)])
        clock.advance(500)
        store.log.append(job_stream("j"), 2, [JobAbandoned("j", "w", 1, 1, 1_000)])
        store.log.append(job_stream("j"), 3, [JobCancelled("j")])
        store.log.append(job_stream("j"), 4, [JobRetried("j")])
        live = snapshot(store.engine)
        attempts = LIVE.job_attempts
        with store.engine.begin() as connection:  # as revision 7 left it
            _head_as_before(connection)
            connection.execute(delete(attempts).where(attempts.c.outcome == "retried"))
            connection.execute(text("DROP INDEX ix_headgate_schedules_listed"))
            connection.execute(text("ALTER TABLE headgate_schedules DROP COLUMN summary"))  # 9's
            connection.execute(text("ALTER TABLE headgate_log_head DROP COLUMN rebuilding"))  # 10's
            connection.execute(text("DROP TABLE headgate_rebuild_claims"))  # 10's
            _as_revision_10_left_it(connection)
            connection.execute(  # revision 7's writers moved every checkpoint with the head
                text(
                    "UPDATE headgate_projection_checkpoints SET position = "
                    "(SELECT position FROM headgate_log_head)"
                )
            )
            _stamp_as_before(connection, "0007")
    finally:
        store.close()
    engine = create_store_engine(store_url)
    try:
        assert migrate(engine) == list(range(8, LATEST_VERSION + 1))
        assert snapshot(engine) == live
        with engine.connect() as connection:
            rows = connection.execute(
                select(attempts.c.outcome, attempts.c.attempt, attempts.c.started_at_ms)
                .where(attempts.c.job_id == "j")
                .order_by(attempts.c.event_id)
            ).all()
        assert [tuple(row) for row in rows] == [("crashed", 1, 1_000), ("retried", 0, None)]
    finally:
        engine.dispose()
    store = SqlStore(store_url, clock)
    try:
        assert verify(store).ok
    finally:
        store.close()


def test_revision_23_gives_the_runs_already_in_the_log_the_rows_a_fold_makes(
    store_url: str,
) -> None:
    """A store upgraded with tick and Enqueue-now jobs in its log gains their run
    rows as a rebuild makes them (their outcomes were recorded before events
    named the schedule: readers take those from the jobs)."""
    clock = FakeClock(1_000)
    store = SqlStore(store_url, clock)
    try:
        tick = enqueued("tick", "k", "q", None, periodic_schedule_id="nightly", periodic_tick_ms=0)
        manual = enqueued("manual", "k", "q", None, run_now_schedule_id="nightly")
        store.log.append(job_stream("tick"), NO_STREAM, [tick])
        store.log.append(job_stream("manual"), NO_STREAM, [manual])
        store.log.append(job_stream("plain"), NO_STREAM, [enqueued("plain", "k", "q", None)])
        store.log.append(job_stream("tick"), 1, [JobSucceeded("tick", 1, "w", 1_000)])
        live = snapshot(store.engine)
        with store.engine.begin() as connection:
            _as_revision_22_left_it(connection)
            _stamp_as_before(connection, "0022")
    finally:
        store.close()
    engine = create_store_engine(store_url)
    try:
        assert migrate(engine) == list(range(23, LATEST_VERSION + 1))
        assert snapshot(engine) == live
    finally:
        engine.dispose()
    store = SqlStore(store_url, clock)
    try:
        runs = store.reads.recent_runs(["nightly"], 10)["nightly"]
        assert [(read.run.job_id, read.run.manual, read.facts().outcome) for read in runs] == [
            ("manual", True, "enqueued"),
            ("tick", False, "succeeded"),
        ]
        assert verify(store).ok
    finally:
        store.close()


def _as_revision_27_left_it(connection: Connection) -> None:
    """Undo revision 28 (a job's tags)."""
    connection.execute(text("ALTER TABLE headgate_jobs DROP COLUMN tags"))


def test_revision_28_gives_stored_jobs_no_tags(store_url: str) -> None:
    clock = FakeClock(1_000)
    store = SqlStore(store_url, clock)
    try:
        store.log.append(job_stream("old"), NO_STREAM, [enqueued("old", "k", "q", None)])
        with store.engine.begin() as connection:
            _as_revision_27_left_it(connection)
            _stamp_as_before(connection, "0027")
    finally:
        store.close()
    engine = create_store_engine(store_url)
    try:
        assert migrate(engine) == [28]
    finally:
        engine.dispose()
    store = SqlStore(store_url, clock)
    try:
        row = store.reads.job("old")
        assert row is not None and row.tags is None
        assert verify(store).ok
    finally:
        store.close()


def _as_revision_26_left_it(connection: Connection) -> None:
    """Undo revision 27 (the one-job-per-tick index over every job again)."""
    _as_revision_27_left_it(connection)
    connection.execute(text("DROP INDEX ux_headgate_jobs_periodic_origin"))
    connection.execute(
        text(
            "CREATE UNIQUE INDEX ux_headgate_jobs_periodic_origin"
            " ON headgate_jobs (periodic_schedule_id, periodic_tick_ms)"
        )
    )
    connection.execute(text("DROP INDEX ix_headgate_jobs_live_ticks"))
    connection.execute(
        text(
            "CREATE INDEX ix_headgate_jobs_live_ticks"
            " ON headgate_jobs (periodic_schedule_id, periodic_tick_ms)"
            " WHERE state IN ('pending', 'running') AND periodic_schedule_id IS NOT NULL"
        )
    )


def _tick_index_holds_tick_jobs_only(engine: Engine) -> bool:
    query = (
        "SELECT sql FROM sqlite_master WHERE name = 'ux_headgate_jobs_periodic_origin'"
        if engine.dialect.name == "sqlite"
        else "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema()"
        " AND indexname = 'ux_headgate_jobs_periodic_origin'"
    )
    with engine.connect() as connection:
        (definition,) = connection.exec_driver_sql(query).one()
    return "periodic_schedule_id IS NOT NULL" in str(definition)


def test_revision_27_indexes_tick_jobs_only_and_keeps_one_job_per_tick(store_url: str) -> None:
    clock = FakeClock(1_000)
    store = SqlStore(store_url, clock)
    try:
        create_schedule(store, "nightly")
        fire_tick(store, "nightly", 60_000)
        store.log.append(job_stream("by-hand"), NO_STREAM, [enqueued("by-hand", "k", "q", None)])
        with store.engine.begin() as connection:
            _as_revision_26_left_it(connection)
            _stamp_as_before(connection, "0026")
    finally:
        store.close()
    engine = create_store_engine(store_url)
    try:
        assert not _tick_index_holds_tick_jobs_only(engine)
        assert migrate(engine) == list(range(27, LATEST_VERSION + 1))
        assert _tick_index_holds_tick_jobs_only(engine)
    finally:
        engine.dispose()
    store = SqlStore(store_url, clock)
    try:
        second = enqueued("again", "k", "q", None, None, "nightly", 60_000)
        with pytest.raises(ConstraintViolation, match="one job"):
            store.log.append(job_stream("again"), NO_STREAM, [second])
        with store.log.write() as transaction:
            row = transaction.job_for_tick("nightly", 60_000)
        assert row is not None and row.job_id == "job-for-nightly-60000"
        store.log.append(
            job_stream("by-hand-2"), NO_STREAM, [enqueued("by-hand-2", "k", "q", None)]
        )
        assert verify(store).ok
    finally:
        store.close()


def _as_revision_24_left_it(connection: Connection) -> None:
    """Undo revisions 27 and 25 (jobs searched by unique key, read by kind)."""
    _as_revision_26_left_it(connection)
    connection.execute(text("DROP INDEX ix_headgate_jobs_unique_key"))
    connection.execute(text("DROP INDEX ix_headgate_jobs_kind_state"))


def _as_revision_23_left_it(connection: Connection) -> None:
    """Undo revisions 25 and 24 (the handler declarations)."""
    _as_revision_24_left_it(connection)
    connection.execute(text("DROP TABLE headgate_handler_declarations"))


def _as_revision_22_left_it(connection: Connection) -> None:
    """Undo revisions 24 and 23 (the schedules' runs)."""
    _as_revision_23_left_it(connection)
    connection.execute(text("DROP TABLE headgate_schedule_runs"))
    connection.execute(
        text("DELETE FROM headgate_projection_checkpoints WHERE name = 'schedule_runs'")
    )


def _as_revision_21_left_it(connection: Connection) -> None:
    """Undo revisions 23 and 22 (the live schedules' specs by index)."""
    _as_revision_22_left_it(connection)
    connection.execute(text("DROP INDEX ix_headgate_schedules_live_specs"))


def _as_revision_20_left_it(connection: Connection) -> None:
    """Undo revisions 23 to 21 (failed attempts' tracebacks)."""
    _as_revision_21_left_it(connection)
    connection.execute(text("ALTER TABLE headgate_job_attempts DROP COLUMN traceback"))


def _as_revision_19_left_it(connection: Connection) -> None:
    """Undo revisions 23 to 20 (the console's ended sessions)."""
    _as_revision_20_left_it(connection)
    connection.execute(text("DROP TABLE headgate_revoked_sessions"))


def _as_revision_18_left_it(connection: Connection) -> None:
    """Undo revisions 23 to 19 (late jobs by start deadline)."""
    _as_revision_19_left_it(connection)
    connection.execute(text("DROP INDEX ix_headgate_jobs_start_by"))


def _as_revision_17_left_it(connection: Connection) -> None:
    """Undo revisions 23 to 18 (a job's trace context)."""
    _as_revision_18_left_it(connection)
    connection.execute(text("ALTER TABLE headgate_jobs DROP COLUMN trace_context"))


def _as_revision_16_left_it(connection: Connection) -> None:
    """Undo revisions 19 to 17 (the kinds a worker runs)."""
    _as_revision_17_left_it(connection)
    connection.execute(text("ALTER TABLE headgate_workers DROP COLUMN kinds"))


def _as_revision_15_left_it(connection: Connection) -> None:
    """Undo revisions 19 to 16 (fair-share lanes)."""
    _as_revision_16_left_it(connection)
    connection.execute(text("DROP TABLE headgate_queue_turns"))
    connection.execute(text("DROP INDEX ix_headgate_jobs_partition_turns"))
    connection.execute(
        text(
            "CREATE INDEX ix_headgate_jobs_partition_turns ON headgate_jobs "
            "(queue, partition_key, fair_turn) "
            "WHERE state IN ('pending', 'running') AND partition_key IS NOT NULL"
        )
    )
    connection.execute(
        text(
            "CREATE INDEX ix_headgate_jobs_queue_turns ON headgate_jobs (queue, fair_turn) "
            "WHERE state = 'pending' AND partition_key IS NOT NULL"
        )
    )


def _as_revision_14_left_it(connection: Connection) -> None:
    """Undo revisions 19 to 15 (limits, rate classes, fair share)."""
    _as_revision_15_left_it(connection)
    for table in (
        "headgate_concurrency_limits",
        "headgate_rate_limits",
        "headgate_rate_starts",
        "headgate_activity",
    ):
        connection.execute(text(f"DROP TABLE {table}"))
    connection.execute(text("DROP INDEX ix_headgate_enqueue_history_recorded"))
    connection.execute(text("DROP INDEX ix_headgate_job_attempts_ended"))
    connection.execute(
        text(
            "DELETE FROM headgate_projection_checkpoints "
            "WHERE name IN ('concurrency_limits', 'rate_limits')"
        )
    )
    for index in ("claimable", "partition_turns", "queue_turns"):
        connection.execute(text(f"DROP INDEX ix_headgate_jobs_{index}"))
    for table, column in (
        ("headgate_jobs", "partition_key"),
        ("headgate_jobs", "rate_class"),
        ("headgate_jobs", "fair_turn"),
        ("headgate_schedules", "partition_key"),
        ("headgate_schedules", "rate_class"),
    ):
        connection.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
    connection.execute(
        text(
            "CREATE INDEX ix_headgate_jobs_claimable ON headgate_jobs "
            "(queue, priority DESC, run_at_ms, job_id) WHERE state = 'pending'"
        )
    )


def _as_revision_13_left_it(connection: Connection) -> None:
    """Undo revisions 19 to 14 (snoozes)."""
    _as_revision_14_left_it(connection)
    connection.execute(text("ALTER TABLE headgate_jobs DROP COLUMN snoozes"))


def _as_revision_12_left_it(connection: Connection) -> None:
    """Undo revisions 19 to 13 (overlap policies and start deadlines)."""
    _as_revision_13_left_it(connection)
    connection.execute(text("DROP INDEX ix_headgate_jobs_live_ticks"))
    for table, column in (
        ("headgate_schedules", "overlap"),
        ("headgate_schedules", "start_within_ms"),
        ("headgate_jobs", "serial"),
        ("headgate_jobs", "start_within_ms"),
        ("headgate_jobs", "start_by_ms"),
    ):
        connection.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
    connection.execute(text("DROP INDEX ix_headgate_jobs_finished"))
    connection.execute(
        text(
            "CREATE INDEX ix_headgate_jobs_finished ON headgate_jobs (updated_at_ms) "
            "WHERE state IN ('completed', 'failed', 'cancelled')"
        )
    )


def _as_revision_10_left_it(connection: Connection) -> None:
    """Undo revisions 19 to 12 (paused queues) and 11 (priorities, in the claim index)."""
    _as_revision_12_left_it(connection)
    connection.execute(text("DROP TABLE headgate_paused_queues"))
    connection.execute(
        text("DELETE FROM headgate_projection_checkpoints WHERE name = 'paused_queues'")
    )
    connection.execute(text("DROP INDEX ix_headgate_jobs_claimable"))
    connection.execute(text("ALTER TABLE headgate_jobs DROP COLUMN priority"))
    connection.execute(text("ALTER TABLE headgate_schedules DROP COLUMN priority"))
    connection.execute(
        text(
            "CREATE INDEX ix_headgate_jobs_claimable ON headgate_jobs "
            "(queue, run_at_ms, job_id) WHERE state = 'pending'"
        )
    )


def test_revision_11_gives_stored_jobs_the_default_priority_and_claims_by_it(
    store_url: str,
) -> None:
    clock = FakeClock(1_000)
    store = SqlStore(store_url, clock)
    try:
        store.log.append(job_stream("old"), NO_STREAM, [enqueued("old", "k", "q", None)])
        create_schedule(store, "nightly")
        with store.engine.begin() as connection:
            _as_revision_10_left_it(connection)
            _stamp_as_before(connection, "0010")
    finally:
        store.close()
    engine = create_store_engine(store_url)
    try:
        assert migrate(engine) == list(range(11, LATEST_VERSION + 1))
    finally:
        engine.dispose()
    store = SqlStore(store_url, clock)
    try:
        store.log.append(
            job_stream("urgent"), NO_STREAM, [enqueued("urgent", "k", "q", None, priority=9)]
        )
        old = store.reads.job("old")
        assert old is not None and old.priority == 0
        schedule = store.reads.schedule("nightly")
        assert schedule is not None and schedule.priority is None
        with store.log.write() as transaction:
            claimed = transaction.claim({"q": 2}, {"k": 1}, "w", 2_000)
        assert [row.job_id for row in claimed] == ["urgent", "old"]
        assert verify(store).ok
    finally:
        store.close()


def test_revision_13_lets_stored_schedules_overlap_and_gives_stored_jobs_no_deadline(
    store_url: str,
) -> None:
    clock = FakeClock(1_000)
    store = SqlStore(store_url, clock)
    try:
        create_schedule(store, "nightly")
        fire_tick(store, "nightly", 60_000)
        with store.engine.begin() as connection:
            _as_revision_12_left_it(connection)
            _stamp_as_before(connection, "0012")
    finally:
        store.close()
    engine = create_store_engine(store_url)
    try:
        assert migrate(engine) == list(range(13, LATEST_VERSION + 1))
    finally:
        engine.dispose()
    store = SqlStore(store_url, clock)
    try:
        schedule = store.reads.schedule("nightly")
        assert schedule is not None and schedule.overlap == "allow"
        assert schedule.start_within_ms is None
        [job] = store.reads.jobs_page(JobFilter(), 10, None).items
        assert not job.serial and job.start_by_ms is None and job.start_within_ms is None
        assert job.snoozes == 0
        assert verify(store).ok
    finally:
        store.close()


def test_revision_15_gives_stored_jobs_the_first_turn_and_no_limits(store_url: str) -> None:
    """Jobs stored before fair share take turn 0 and no partition or rate class,
    so they are claimed in the order they had; the limit tables start empty and
    caught up, and a limit set after the upgrade holds."""
    clock = FakeClock(1_000)
    store = SqlStore(store_url, clock)
    try:
        for job_id in ("old-2", "old-1"):
            store.log.append(job_stream(job_id), NO_STREAM, [enqueued(job_id, "k", "q", None)])
        create_schedule(store, "nightly")
        with store.engine.begin() as connection:
            _as_revision_14_left_it(connection)
            _stamp_as_before(connection, "0014")
    finally:
        store.close()
    engine = create_store_engine(store_url)
    try:
        assert migrate(engine) == list(range(15, LATEST_VERSION + 1))
    finally:
        engine.dispose()
    store = SqlStore(store_url, clock)
    try:
        old = store.reads.job("old-1")
        assert old is not None and old.fair_turn == 0 and old.partition_key is None
        schedule = store.reads.schedule("nightly")
        assert schedule is not None and schedule.partition_key is None
        assert store.reads.limits_state(clock.now_ms()).limits == []
        store.log.append(
            limit_stream(scope_of("q", None, None)),
            NO_STREAM,
            [ConcurrencyLimitSet("q", None, None, 1)],
        )
        with store.log.write() as transaction:
            claimed = transaction.claim({"q": 2}, {"k": 60_000}, "w", 2_000)
        assert [row.job_id for row in claimed] == ["old-1"], "oldest run_at first, one slot"
        assert verify(store).ok
    finally:
        store.close()


def test_revision_16_starts_each_lane_at_its_running_jobs_turn(store_url: str) -> None:
    """A lane's current turn starts at the highest turn among its running jobs, so
    a partition's new job joins the round under way rather than the first one."""
    clock = FakeClock(1_000)
    store = SqlStore(store_url, clock)
    try:
        for turn in (5, 6, 7):
            job = enqueued(f"a-{turn}", "k", "q", None)
            event = dataclasses.replace(
                job, options=dataclasses.replace(job.options, partition_key="a"), fair_turn=turn
            )
            store.log.append(job_stream(job.job_id), NO_STREAM, [event])
        with store.log.write() as transaction:
            claimed = transaction.claim({"q": 2}, {"k": 60_000}, "w", 2_000)
        assert [row.fair_turn for row in claimed] == [5, 6]
        with store.engine.begin() as connection:
            _as_revision_15_left_it(connection)
            _stamp_as_before(connection, "0015")
    finally:
        store.close()
    engine = create_store_engine(store_url)
    try:
        assert migrate(engine) == list(range(16, LATEST_VERSION + 1))
    finally:
        engine.dispose()
    store = SqlStore(store_url, clock)
    try:
        options = JobOptions.restored(queue="q", partition_key="b")
        candidate = Candidate(JobEnqueued("b-1", "k", None, options), "f", 4)
        with store.log.write() as transaction:
            turns = transaction.gate_facts([candidate], []).turns
        assert turns.current == {("q", 0): 6}
        assert verify(store).ok
    finally:
        store.close()


def test_revision_17_reads_an_earlier_workers_row_as_serving_every_kind_of_its_queues(
    store_url: str,
) -> None:
    clock = FakeClock(1_000)
    store = SqlStore(store_url, clock)
    try:
        store.workers.beat(WorkerBeat("vm:1:a", "vm", 1, {"reports": 2}, 1_000, 0, 0), 60_000)
        with store.engine.begin() as connection:
            _as_revision_16_left_it(connection)
            _stamp_as_before(connection, "0016")
    finally:
        store.close()
    engine = create_store_engine(store_url)
    try:
        assert migrate(engine) == list(range(17, LATEST_VERSION + 1))
    finally:
        engine.dispose()
    store = SqlStore(store_url, clock)
    try:
        (row,) = store.workers.live(clock.now_ms())
        assert (row.queues, row.kinds) == ({"reports": 2}, None)
        assert Serving.of([(row.queues, row.kinds)]).serves("reports", "any.kind")
        assert verify(store).ok
    finally:
        store.close()


def test_revision_10_keeps_refusing_writes_while_a_projection_lags_the_head(
    store_url: str,
) -> None:
    """Until revision 10 a projection whose checkpoint was behind the log head kept
    every write out, as a rebuild under way does; the head's flag says so now,
    until a rebuild brings it up."""
    clock = FakeClock(1_000)
    store = SqlStore(store_url, clock)
    try:
        create_schedule(store, "nightly")
        fire_tick(store, "nightly", 60_000)
        with store.engine.begin() as connection:  # as revision 9 left a lagging one
            _head_as_before(connection)
            _as_revision_10_left_it(connection)
            connection.execute(text("ALTER TABLE headgate_log_head DROP COLUMN rebuilding"))
            connection.execute(text("DROP TABLE headgate_rebuild_claims"))
            connection.execute(
                text(
                    "UPDATE headgate_projection_checkpoints SET position = "
                    "(SELECT position FROM headgate_log_head)"
                )
            )
            connection.execute(
                update(projection_checkpoints)
                .where(projection_checkpoints.c.name == "schedules")
                .values(position=1)
            )
            _stamp_as_before(connection, "0009")
    finally:
        store.close()
    engine = create_store_engine(store_url)
    try:
        assert migrate(engine) == list(range(10, LATEST_VERSION + 1))
    finally:
        engine.dispose()
    store = SqlStore(store_url, clock)
    try:
        with pytest.raises(ProjectionsRebuilding, match="schedules at 1 of"):
            fire_tick(store, "nightly", 120_000)
        assert rebuild(store).resumed == ["schedules"]
        fire_tick(store, "nightly", 120_000)
        assert verify(store).ok
    finally:
        store.close()
