"""Stores written by an earlier build (034d2bb: unprefixed tables, versions in
schema_migrations) open in this one with everything they held, on both
backends. The fixtures are that build's own output (fixtures/make_old_store.py)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from headgate import AdmissionRejected, DuplicateJob, Headgate, NotFound, ops
from headgate._store.sql.engine import create_store_engine
from headgate.testing import FakeClock

FIXTURES = Path(__file__).parent / "fixtures"
NOW_MS = 1_704_118_380_000  # where the old build's clock stopped


def _load_old_store(url: str) -> dict[str, Any]:
    """The old build's store at `url`; returns what that build read back from it."""
    backend = make_url(url).get_backend_name()
    dump = (FIXTURES / f"store-034d2bb.{backend}.sql").read_text()
    if backend == "sqlite":
        with sqlite3.connect(str(make_url(url).database)) as connection:
            connection.executescript(dump)
    else:
        engine = create_store_engine(url)
        with engine.begin() as connection:
            connection.exec_driver_sql(dump)
        engine.dispose()
    readings: dict[str, Any] = json.loads((FIXTURES / "store-034d2bb.expected.json").read_text())
    return readings[backend]


def test_an_old_builds_store_reads_back_whole_and_keeps_working(store_url: str) -> None:
    old = _load_old_store(store_url)
    with Headgate(store_url, clock=FakeClock(NOW_MS)) as hg:
        for schedule_id, stands in old["schedules"].items():
            if stands is None:
                with pytest.raises(NotFound):
                    hg.schedules.get(schedule_id)
                continue
            schedule = hg.schedules.get(schedule_id)
            assert [schedule.next_run_ms, schedule.last_enqueued_ms] == stands
        for schedule_id, records in old["history"].items():
            shown = hg.schedules.enqueue_events(schedule_id, limit=100).events
            assert [[e.tick_ms, e.job_id, e.outcome, e.reason] for e in shown] == records
        events = hg._core.store.log.read_all(0, 100_000)
        assert [
            [e.position, e.stream_id, e.version, e.type, e.recorded_at_ms] for e in events
        ] == old["events"]
        for job_id, (state, unique_key) in old["jobs"].items():
            job = hg.jobs.get(job_id)
            assert (job.state, job.unique_key) == (state, unique_key)
        # What those rows mean still holds: the key's manual run, a held unique
        # key, a quarantined fingerprint.
        manual_job, key = old["manual"]
        assert hg.schedules.enqueue_now("every", idempotency_key=key) == (manual_job, True)
        unique_key, holder = old["held_unique_key"]
        with pytest.raises(DuplicateJob) as duplicate:
            hg.enqueue("adhoc", {"x": 9}, unique_key=unique_key)
        assert duplicate.value.job_id == holder
        with pytest.raises(AdmissionRejected):
            hg.enqueue("bad", {"y": 1})
        hg.schedules.put("new", spec="@every:60000", kind="k")
    assert ops.verify(store_url).ok


def test_the_move_leaves_a_version_the_old_build_refuses(store_url: str) -> None:
    """The move leaves `schema_migrations` at version 7; the old build knows up to 6
    and refuses to start on a store at a version it does not know (SchemaTooNew),
    instead of starting afresh on empty tables of the old names."""
    _load_old_store(store_url)
    Headgate(store_url, clock=FakeClock(NOW_MS)).close()
    engine = create_store_engine(store_url)
    try:
        with engine.connect() as connection:
            newest = connection.exec_driver_sql("SELECT max(version) FROM schema_migrations")
            assert newest.scalar_one() == 7
            moved_events = connection.exec_driver_sql(
                "SELECT count(*) FROM headgate_events"
            ).scalar_one()
        assert moved_events > 0
    finally:
        engine.dispose()
