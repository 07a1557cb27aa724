"""How the SQL adapter stores events: canonical JSON bodies with versions, old
shapes upcast on read, and SQLite's durability settings."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import insert, select, text, update

from headgate._domain.events import (
    EnqueueAttempted,
    JobAbandoned,
    JobAttemptFailed,
    JobEnqueued,
    JobQuarantined,
    JobSnoozed,
    JobSucceeded,
    ManualRunRequested,
    MissedRunPolicy,
    NextRunAdvanced,
    Outcome,
    ScheduleDefined,
)
from headgate._store.mapper import UPCASTERS, UnknownEventType
from headgate._store.port import NO_STREAM
from headgate._store.sql.schema import events
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from tests.store.builders import defined, enqueued, schedule_defined


def test_body_is_versioned_json(store: SqlStore) -> None:
    store.log.append("schedule-a", NO_STREAM, [defined("a", payload={"b": [1, 2], "a": "é"})])
    with store.engine.connect() as connection:
        row = connection.execute(select(events)).one()
    assert row.type == "ScheduleDefined"
    assert row.schema_version == 6  # ScheduleDefined: v6 since backfill_max is named so
    assert row.body.startswith(
        '{"changed_by":null,"declared":null,"declared_by":null,"definition":{'
    )
    assert '"payload":{"a":"é","b":[1,2]}' in row.body


def test_old_event_shapes_are_upcast_on_read(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def add_last_enqueued(body: dict[str, object]) -> dict[str, object]:
        return {**body, "last_enqueued_ms": None}

    monkeypatch.setitem(UPCASTERS, ("NextRunAdvanced", 0), add_last_enqueued)
    with store.engine.begin() as connection:
        connection.execute(
            insert(events).values(
                position=1,
                stream_id="schedule-a",
                version=1,
                type="NextRunAdvanced",
                schema_version=0,
                body='{"next_run_ms":5,"schedule_id":"a"}',
                recorded_at_ms=1,
            )
        )
    assert store.log.read_stream("schedule-a")[0].event == NextRunAdvanced("a", 5, None)


@pytest.mark.parametrize(
    ("schema_version", "body"),
    [
        (
            1,
            '{"job_id":"j","kind":"k","payload":null,"periodic_schedule_id":null,'
            '"periodic_tick_ms":null,"queue":"q","unique_key":null}',
        ),
        (
            2,
            '{"job_id":"j","kind":"k","max_attempts":3,"payload":null,'
            '"periodic_schedule_id":null,"periodic_tick_ms":null,"queue":"q","run_at_ms":null,'
            '"timeout_ms":null,"unique_key":null}',
        ),
    ],
)
def test_jobs_enqueued_by_earlier_builds_read_as_unlinked_to_a_manual_run(
    store: SqlStore, schema_version: int, body: str
) -> None:
    with store.engine.begin() as connection:
        connection.execute(
            insert(events).values(
                position=1,
                stream_id="job-j",
                version=1,
                type="JobEnqueued",
                schema_version=schema_version,
                body=body,
                recorded_at_ms=1,
            )
        )
    max_attempts = 3 if schema_version == 2 else None
    assert store.log.read_stream("job-j")[0].event == enqueued(
        "j", "k", "q", None, max_attempts=max_attempts, run_now_schedule_id=None
    )


def _insert_v1_job_events(store: SqlStore, bodies: dict[str, str]) -> None:
    """Job j's events at schema version 1, as an earlier build wrote them, in order."""
    with store.engine.begin() as connection:
        for version, (type_name, body) in enumerate(bodies.items(), start=1):
            connection.execute(
                insert(events).values(
                    position=version,
                    stream_id="job-j",
                    version=version,
                    type=type_name,
                    schema_version=1,
                    body=body,
                    recorded_at_ms=1,
                )
            )


def test_crashes_recorded_before_they_named_their_attempt_read_with_none(
    store: SqlStore,
) -> None:
    """JobAbandoned and JobQuarantined v1 did not say which attempt the crash
    ended, nor when it began: unknown, so the history shows neither."""
    bodies = {
        "JobAbandoned": '{"crash_count":1,"job_id":"j","worker_id":"w"}',
        "JobQuarantined": '{"crash_count":3,"fingerprint":"fp","job_id":"j"}',
    }
    _insert_v1_job_events(store, bodies)
    abandoned, quarantined = [e.event for e in store.log.read_stream("job-j")]
    assert abandoned == JobAbandoned("j", "w", 1, attempt=None, claimed_at_ms=None)
    assert quarantined == JobQuarantined("j", "fp", 3, attempt=None, claimed_at_ms=None)


def test_attempt_ends_from_before_they_named_their_limits_read_with_none(
    store: SqlStore,
) -> None:
    """JobSucceeded, JobAttemptFailed and JobSnoozed v1 did not say the attempt
    limit and timeout the attempt ran under: unknown, so the job's row keeps
    what it had (its own options, or none); nor a failure's traceback."""
    bodies = {
        "JobSnoozed": '{"attempt":1,"job_id":"j","run_at_ms":5,"snoozes":1,'
        '"started_at_ms":2,"worker_id":"w"}',
        "JobAttemptFailed": '{"attempt":1,"error_message":"no","error_type":"E","job_id":"j",'
        '"retry_at_ms":9,"started_at_ms":6,"timed_out":false,"worker_id":"w"}',
        "JobSucceeded": '{"attempt":2,"job_id":"j","result":1,"started_at_ms":10,"worker_id":"w"}',
    }
    _insert_v1_job_events(store, bodies)
    snoozed, failed, succeeded = [e.event for e in store.log.read_stream("job-j")]
    assert snoozed == JobSnoozed("j", 1, "w", 2, 5, 1, max_attempts=None, timeout_ms=None)
    assert failed == JobAttemptFailed("j", 1, "w", 6, "E", "no", 9, False, None, None, None)
    assert succeeded == JobSucceeded("j", 2, "w", 10, 1, max_attempts=None, timeout_ms=None)


def _insert(store: SqlStore, rows: list[tuple[int, str, int, str]]) -> None:
    """Events as an earlier build wrote them: (version, type, schema version, body)."""
    with store.engine.begin() as connection:
        for position, (version, type_name, schema_version, body) in enumerate(rows, start=1):
            connection.execute(
                insert(events).values(
                    position=position,
                    stream_id="schedule-a",
                    version=version,
                    type=type_name,
                    schema_version=schema_version,
                    body=body,
                    recorded_at_ms=1,
                )
            )


def test_schedules_from_before_bounds_and_jitter_read_as_unbounded_and_unjittered(
    store: SqlStore,
) -> None:
    """ScheduleDefined v2, EnqueueAttempted v2 and NextRunAdvanced v1 had no
    bounds, jitter or finished flag: they read with none, due at next_run_ms."""
    _insert(
        store,
        [
            (
                1,
                "ScheduleDefined",
                2,
                '{"backfill_limit":1,"kind":"k","last_enqueued_ms":null,"max_attempts":null,'
                '"next_run_ms":60000,"on_missed":"skip","paused":false,"payload":null,'
                '"queue":"default","schedule_id":"a","spec":"@every:60000","timeout_ms":null}',
            ),
            (
                2,
                "EnqueueAttempted",
                2,
                '{"attempt":1,"job_id":"j","last_enqueued_ms":60000,"next_run_ms":120000,'
                '"outcome":"enqueued","reason":"accepted","retry_at_ms":null,'
                '"schedule_id":"a","tick_ms":60000}',
            ),
            (
                3,
                "NextRunAdvanced",
                1,
                '{"last_enqueued_ms":60000,"next_run_ms":180000,"schedule_id":"a"}',
            ),
        ],
    )
    defined_v2, attempted_v2, advanced_v1 = [e.event for e in store.log.read_stream("schedule-a")]
    assert defined_v2 == schedule_defined(
        "a", "@every:60000", "k", "default", None, MissedRunPolicy.SKIP, 1, False, 60000
    )
    definition = defined_v2.definition
    assert (definition.start_at_ms, definition.end_at_ms, definition.jitter_ms) == (None, None, 0)
    assert defined_v2.due_at_ms is None
    assert attempted_v2 == EnqueueAttempted(
        "a", 60000, "j", Outcome.ENQUEUED, "accepted", next_run_ms=120000, last_enqueued_ms=60000
    )
    assert (attempted_v2.due_at_ms, attempted_v2.finished) == (None, False)
    assert advanced_v1 == NextRunAdvanced("a", 180000, 60000)
    assert (advanced_v1.due_at_ms, advanced_v1.finished) == (None, False)


def test_an_unknown_event_type_is_a_clear_error(store: SqlStore) -> None:
    """An event a newer build wrote, of a type this one does not know (appended
    as the log appends, so it is at a position the log hands out)."""
    store.log.append("manual-x", NO_STREAM, [ManualRunRequested("s", "key", "j")])
    with store.engine.begin() as connection:
        connection.execute(
            update(events).where(events.c.stream_id == "manual-x").values(type="Mystery", body="{}")
        )
    with pytest.raises(UnknownEventType, match="unknown event type 'Mystery'"):
        store.log.read_all()


def test_sqlite_is_durable_wal(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'd.db'}", FakeClock())
    try:
        with store.engine.connect() as connection:
            assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert connection.execute(text("PRAGMA synchronous")).scalar() == 2  # FULL
            assert connection.execute(text("PRAGMA busy_timeout")).scalar() == 30_000
            assert connection.execute(text("PRAGMA page_size")).scalar() == 4096
    finally:
        store.close()


def test_an_existing_sqlite_store_keeps_its_page_size(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)  # as 0.2.0 created it
    old.execute("PRAGMA page_size=16384")
    old.execute("PRAGMA journal_mode=WAL")
    old.execute("CREATE TABLE keep_me (x INTEGER)")
    old.close()
    store = SqlStore(f"sqlite:///{path}", FakeClock())
    try:
        store.log.append("schedule-a", NO_STREAM, [defined("a")])
        with store.engine.connect() as connection:
            assert connection.execute(text("PRAGMA page_size")).scalar() == 16384
        assert [e.event for e in store.log.read_stream("schedule-a")] == [defined("a")]
    finally:
        store.close()


def test_definitions_and_job_options_from_before_the_value_objects_read_nested(
    store: SqlStore,
) -> None:
    """ScheduleDefined v3 and JobEnqueued v3 spelled the definition and the
    options out field by field: they read as one ScheduleDefinition (its jobs'
    JobOptions inside) and one JobOptions, nothing declared in code."""
    _insert(
        store,
        [
            (
                1,
                "ScheduleDefined",
                3,
                '{"backfill_limit":2,"due_at_ms":60500,"end_at_ms":null,"jitter_ms":900,'
                '"kind":"k","last_enqueued_ms":null,"max_attempts":4,"next_run_ms":60000,'
                '"on_missed":"backfill","paused":true,"payload":{"t":7},"queue":"q",'
                '"schedule_id":"a","spec":"@every:60000","start_at_ms":null,"timeout_ms":9000}',
            ),
        ],
    )
    with store.engine.begin() as connection:
        connection.execute(
            insert(events).values(
                position=2,
                stream_id="job-j",
                version=1,
                type="JobEnqueued",
                schema_version=3,
                body='{"job_id":"j","kind":"k","max_attempts":3,"payload":null,'
                '"periodic_schedule_id":null,"periodic_tick_ms":null,"queue":"q",'
                '"run_at_ms":70000,"run_now_schedule_id":"a","timeout_ms":null,'
                '"unique_key":"u"}',
                recorded_at_ms=1,
            )
        )
    (defined_v3,) = [e.event for e in store.log.read_stream("schedule-a")]
    assert defined_v3 == schedule_defined(
        "a",
        "@every:60000",
        "k",
        "q",
        {"t": 7},
        "backfill",
        2,
        True,
        60000,
        max_attempts=4,
        timeout_ms=9000,
        jitter_ms=900,
        due_at_ms=60500,
    )
    assert (defined_v3.declared, defined_v3.declared_by) == (None, None)
    (job_v3,) = [e.event for e in store.log.read_stream("job-j")]
    assert job_v3 == enqueued(
        "j", "k", "q", None, "u", run_at_ms=70000, max_attempts=3, run_now_schedule_id="a"
    )


def test_a_job_enqueued_before_overlap_policies_reads_as_not_serial(store: SqlStore) -> None:
    """JobEnqueued v4 had no `serial`: no schedule held its tick jobs to one at a
    time, so its job is not serial, and the projection claims it as before."""
    with store.engine.begin() as connection:
        connection.execute(
            insert(events).values(
                position=1,
                stream_id="job-j",
                version=1,
                type="JobEnqueued",
                schema_version=4,
                body='{"job_id":"j","kind":"k","options":{"max_attempts":null,"queue":"q",'
                '"run_at_ms":null,"timeout_ms":null,"unique_key":null},"payload":null,'
                '"periodic_schedule_id":"s","periodic_tick_ms":60000,'
                '"run_now_schedule_id":null}',
                recorded_at_ms=1,
            )
        )
    (job_v4,) = [e.event for e in store.log.read_stream("job-j")]
    assert isinstance(job_v4, JobEnqueued) and job_v4.serial is False
    assert job_v4.periodic_tick_ms == 60_000 and job_v4.options.start_within_ms is None


def test_a_job_enqueued_before_fair_share_takes_the_first_turn_and_keeps_serial(
    store: SqlStore,
) -> None:
    """JobEnqueued v4 had no `fair_turn` (its job is claimed as before: turn 0,
    no partition key); the overlap release wrote `serial` under v4 already, and
    a stored serial flag is kept."""
    with store.engine.begin() as connection:
        connection.execute(
            insert(events).values(
                position=1,
                stream_id="job-j",
                version=1,
                type="JobEnqueued",
                schema_version=4,
                body='{"job_id":"j","kind":"k","options":{"queue":"q","priority":3},'
                '"payload":null,"periodic_schedule_id":"s","periodic_tick_ms":60000,'
                '"run_now_schedule_id":null,"serial":true}',
                recorded_at_ms=1,
            )
        )
    (job_v4,) = [e.event for e in store.log.read_stream("job-j")]
    assert isinstance(job_v4, JobEnqueued)
    assert (job_v4.serial, job_v4.fair_turn, job_v4.options.partition_key) == (True, 0, None)
    assert job_v4.options.priority == 3 and job_v4.options.rate_class is None


def test_a_definition_from_before_backfill_max_was_named_so_reads_with_its_value(
    store: SqlStore,
) -> None:
    """ScheduleDefined v5 named `backfill_max` `backfill_limit`, in the definition
    and in what the code declared: both read under the name now, value kept."""
    definition = (
        '{"backfill_limit":7,"end_at_ms":null,"jitter_ms":0,"job":{"max_attempts":null,'
        '"partition_key":null,"priority":null,"queue":"q","rate_class":null,'
        '"run_at_ms":null,"start_within_ms":null,"timeout_ms":null,"unique_key":null},'
        '"kind":"k","on_missed":"backfill","overlap":"allow","paused":false,"payload":null,'
        '"spec":"@every:60000","start_at_ms":null,"summary":""}'
    )
    _insert(
        store,
        [
            (
                1,
                "ScheduleDefined",
                5,
                f'{{"changed_by":null,"declared":{definition},"declared_by":"app",'
                f'"definition":{definition},"due_at_ms":null,"last_enqueued_ms":null,'
                '"next_run_ms":60000,"schedule_id":"a"}',
            )
        ],
    )
    (defined_v5,) = [e.event for e in store.log.read_stream("schedule-a")]
    assert isinstance(defined_v5, ScheduleDefined)
    assert defined_v5.definition.backfill_max == 7
    assert defined_v5.declared is not None
    assert defined_v5.declared.backfill_max == 7
