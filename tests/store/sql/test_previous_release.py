"""A store the previous release (2dbbc39: schema revision 6, events
ScheduleDefined v3 and JobEnqueued v3) wrote opens in this build, migrated in
place, with everything that release read back from it, and goes on ticking; its
projections, rebuilt from the log, equal the migrated ones. The fixture is that
release's own output (fixtures/make_previous_release_store.py)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from headgate import Headgate, NotFound, ops
from headgate._domain.options import FORMER_NAMES
from headgate._store.port import SCHEMA_REVISION
from headgate.testing import FakeClock

FIXTURES = Path(__file__).parent / "fixtures"
PREVIOUS_REVISION = "0006"


@pytest.fixture
def previous_store(tmp_path: Path) -> tuple[str, Path]:
    copy = tmp_path / "previous_release.db"
    shutil.copyfile(FIXTURES / "previous_release.db", copy)
    return f"sqlite:///{copy}", copy


def _expected() -> dict[str, Any]:
    readings: dict[str, Any] = json.loads((FIXTURES / "previous_release.expected.json").read_text())
    return readings


def _revision(path: Path) -> str:
    with closing(sqlite3.connect(path)) as connection:
        rows = connection.execute("SELECT version_num FROM headgate_alembic_version").fetchall()
    (revision,) = rows
    return str(revision[0])


def _as_json(value: object) -> Any:
    """What the previous release's reading looks like after its JSON round trip."""
    return json.loads(json.dumps(value))


def test_the_previous_release_store_reads_back_whole(previous_store: tuple[str, Path]) -> None:
    url, path = previous_store
    expected = _expected()
    assert _revision(path) == PREVIOUS_REVISION
    with Headgate(url, clock=FakeClock(expected["now_ms"])) as hg:
        assert _revision(path) == f"{SCHEMA_REVISION:04d}"
        schedules = hg.schedules.list().schedules
        assert [s.id for s in schedules] == sorted(expected["schedules"])
        for schedule in schedules:
            fields = expected["schedules"][schedule.id]
            read = {name: getattr(schedule, FORMER_NAMES.get(name, name)) for name in fields}
            assert _as_json(read) == fields
            assert schedule.overrides == ()
        with pytest.raises(NotFound):
            hg.schedules.get("retired")
        for schedule_id, records in expected["history"].items():
            shown = hg.schedules.enqueue_events(schedule_id, limit=100).events
            assert [[e.tick_ms, e.job_id, e.outcome, e.reason] for e in shown] == records
        jobs = hg.jobs.list(limit=200).jobs
        assert sorted(job.id for job in jobs) == sorted(expected["jobs"])
        retried = []
        for job_id, fields in expected["jobs"].items():
            job = hg.jobs.get(job_id)
            read = {name: getattr(job, name) for name in fields if name != "attempt_outcomes"}
            outcomes = [a.outcome for a in job.attempt_history]
            if "retried" in outcomes:  # this build shows an operator's retry as a row
                retried.append(job.payload)
            read["attempt_outcomes"] = [o for o in outcomes if o != "retried"]
            assert _as_json(read) == fields, job_id
        assert retried == [{"page": 2}]
        entries = hg.quarantine.list().entries
        assert [[e.fingerprint, e.note, e.quarantined_at_ms] for e in entries] == [
            [e["fingerprint"], e["note"], e["quarantined_at_ms"]] for e in expected["quarantine"]
        ]
        assert [j.id for j in hg.schedules.manual_runs("pulse").jobs] == expected["manual_runs"]
        assert hg.schedules.enqueue_now("pulse", idempotency_key="click-1") == (
            expected["manual_runs"][0],
            True,
        )


def test_the_previous_release_store_fires_its_next_tick_and_rebuilds_the_same(
    previous_store: tuple[str, Path],
) -> None:
    url, _ = previous_store
    expected = _expected()
    clock = FakeClock(expected["now_ms"])
    with Headgate(url, clock=clock) as hg:
        due = hg.schedules.get("pulse").next_run_ms
        assert due == expected["schedules"]["pulse"]["next_run_ms"]
        hg.start(workers=False)
        clock.set(due)
        assert hg.fire_due_ticks()
        newest = hg.schedules.enqueue_events("pulse", limit=1).events[0]
        assert (newest.tick_ms, newest.outcome) == (due, "enqueued")
        job = hg.jobs.get(newest.job_id)
        assert (job.state, job.periodic_origin) == ("pending", ("pulse", due))
        assert hg.schedules.get("pulse").next_run_ms == due + 60_000
    report = ops.verify(url)
    assert report.ok, report.differences
