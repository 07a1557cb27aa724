"""A schedule or a job as of a past instant, folded from its stream, equals what
the live row was at that instant; a schedule's changes say what changed and who
changed it, a payload by its keys only (SQLite, PostgreSQL and memory)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from headgate import Headgate, NotFound, ValidationError
from headgate._actors import CLI, acting_as
from headgate._domain.definition_history import payload_outline
from headgate._history import BEFORE_KEPT, DEFINED, DELETED, NOT_YET
from headgate._model import Schedule
from headgate._store.port import CompactionPolicy
from headgate.testing import FakeClock
from tests.conftest import BACKENDS, empty_store_url

MINUTE = 60_000


@pytest.fixture(params=[*BACKENDS, "memory"])
def hg(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> Iterator[Headgate]:
    urls: Iterator[str] = iter(())
    if request.param == "memory":
        url = "memory://"
    else:
        urls = empty_store_url(request.param, request, tmp_path)
        url = next(urls)
    with Headgate(url, clock=clock) as opened:
        yield opened
    for _ in urls:  # drops the PostgreSQL schema
        pass


def test_as_of_each_change_equals_the_live_schedule_then(hg: Headgate, clock: FakeClock) -> None:
    """At every event boundary, the fold up to it is the schedule the live read
    gave right after it, and one millisecond before the next it still is."""
    seen = []
    hg.schedules.put("nightly", spec="@every:60000", kind="report", payload={"team": 7})
    seen.append((clock.now_ms(), hg.schedules.get("nightly")))
    hg.start(workers=False)
    for step in range(3):
        clock.advance(2 * MINUTE)
        assert hg.fire_due_ticks(), "a tick was due"
        seen.append((clock.now_ms(), hg.schedules.get("nightly")))
        clock.advance(1_000)
        hg.schedules.update("nightly", spec=f"@every:{(step + 2) * MINUTE}")
        seen.append((clock.now_ms(), hg.schedules.get("nightly")))
    for (instant, live), (following, _) in zip(
        seen, [*seen[1:], (clock.now_ms() + 1, None)], strict=True
    ):
        for at in {instant, following - 1}:
            as_of = hg.schedules.as_of("nightly", at)
            assert as_of.state == DEFINED and as_of.exact
            assert as_of.schedule == _outlined(live), at
    assert len({live.last_enqueued_ms for _, live in seen}) == 4  # every tick folded too


def test_as_of_before_an_edit_shows_the_old_definition_and_who_made_it(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("nightly", spec="0 2 * * *", kind="report")
    created = clock.now_ms()
    clock.advance(MINUTE)
    with acting_as(CLI):
        hg.schedules.update("nightly", spec="0 3 * * *")
    old = hg.schedules.as_of("nightly", clock.now_ms() - 1)
    assert old.schedule is not None and old.schedule.spec == "0 2 * * *"
    assert (old.changed_at_ms, old.changed_by) == (created, "operator:python")
    new = hg.schedules.as_of("nightly", clock.now_ms())
    assert new.schedule is not None and new.schedule.spec == "0 3 * * *"
    assert new.changed_by == "operator:cli"
    assert hg.schedules.as_of("nightly", created - 1).state == NOT_YET


def test_an_instant_in_iso_8601_and_a_bad_one_named(hg: Headgate, clock: FakeClock) -> None:
    hg.schedules.put("nightly", spec="0 2 * * *", kind="report")
    iso = "2024-01-01T00:00:00Z"  # the fake clock's start
    assert hg.schedules.as_of("nightly", iso).state == DEFINED
    assert hg.schedules.as_of("nightly", "2024-01-01T00:00:00").state == DEFINED  # UTC
    for bad in ("yesterday", "", "¹", -1, True):  # "¹".isdigit(), yet no number
        with pytest.raises(ValidationError, match=r"^as_of: must be"):
            hg.schedules.as_of("nightly", bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"^until: must not be before since"):
        hg.schedules.changes("nightly", since=10, until=5)
    with pytest.raises(ValidationError, match=r"^limit:"):
        hg.schedules.changes("nightly", limit=0)
    with pytest.raises(NotFound):
        hg.schedules.as_of("missing", iso)


def test_a_deleted_schedule_as_of_after_its_deletion(hg: Headgate, clock: FakeClock) -> None:
    hg.schedules.put("nightly", spec="0 2 * * *", kind="report")
    clock.advance(MINUTE)
    hg.schedules.delete("nightly")
    gone = hg.schedules.as_of("nightly", clock.now_ms())
    assert gone.state == DELETED and gone.changed_by == "operator:python"
    assert gone.schedule is not None and gone.schedule.spec == "0 2 * * *"
    assert hg.schedules.as_of("nightly", clock.now_ms() - 1).state == DEFINED


def test_changes_are_a_diff_with_who_and_payload_keys_never_values(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("nightly", spec="0 2 * * *", kind="report", payload={"token": "s3cret"})
    start = clock.now_ms()
    clock.advance(MINUTE)
    with acting_as(CLI):
        hg.schedules.update("nightly", spec="0 3 * * *", payload={"token": "n3w", "team": 7})
    clock.advance(MINUTE)
    hg.schedules.delete("nightly")
    changes = hg.schedules.changes("nightly")
    assert [(c.what, c.changed_by) for c in changes.changes] == [
        ("created", "operator:python"),
        ("changed", "operator:cli"),
        ("deleted", "operator:python"),
    ]
    edit = {f.field: (f.before, f.after) for f in changes.changes[1].fields}
    assert edit["spec"] == ("0 2 * * *", "0 3 * * *")
    assert edit["payload"] == (
        "an object with keys token",
        "an object with keys team, token (added: team; changed: token)",
    )
    assert "s3cret" not in repr(changes) and "n3w" not in repr(changes)
    for at in (start, start + MINUTE, clock.now_ms()):  # a rotated value, a deleted one
        past = repr(hg.schedules.as_of("nightly", at))
        assert "s3cret" not in past and "n3w" not in past, at
        assert "an object with keys" in past
    since_creation = hg.schedules.changes("nightly", since=start, until=start + MINUTE)
    assert [c.what for c in since_creation.changes] == ["changed"]
    assert not since_creation.more_before
    newest = hg.schedules.changes("nightly", limit=1)
    assert [c.what for c in newest.changes] == ["deleted"] and newest.more_before


def test_code_declarations_are_attributed_to_their_group(clock: FakeClock) -> None:
    hg = Headgate("memory://", clock=clock)
    hg.periodic("nightly", spec="0 2 * * *", kind="report")(lambda payload: None)
    hg.start(workers=False)
    hg.stop()
    (created,) = hg.schedules.changes("nightly").changes
    assert created.what == "created"
    assert created.changed_by is not None and created.changed_by.startswith("code:")
    hg.close()


def test_an_instant_before_what_compaction_kept_is_said_so(hg: Headgate, clock: FakeClock) -> None:
    hg.schedules.put("nightly", spec="0 2 * * *", kind="report")
    first = clock.now_ms()
    clock.advance(MINUTE)
    hg.schedules.update("nightly", spec="0 3 * * *")
    hg._core.store.compact(CompactionPolicy(definitions_per_schedule=1))
    said = hg.schedules.as_of("nightly", first)
    assert (said.state, said.schedule, said.oldest_kept_ms) == (BEFORE_KEPT, None, clock.now_ms())
    (change,) = hg.schedules.changes("nightly").changes
    assert change.what == "changed" and not change.before_known


def test_a_job_as_of_each_of_its_events_equals_the_live_job_then(
    hg: Headgate, clock: FakeClock
) -> None:
    attempts = []

    @hg.handler("flaky", max_attempts=3)
    def flaky(payload: object) -> None:
        attempts.append(payload)
        if len(attempts) < 2:
            raise RuntimeError("not yet")

    job = hg.enqueue("flaky", {"n": 1})
    seen = [(clock.now_ms(), hg.jobs.get(job.id))]
    for _ in range(2):
        clock.advance(MINUTE)
        hg.drain(timeout=30)
        seen.append((clock.now_ms(), hg.jobs.get(job.id)))
    for instant, live in seen:
        as_of = hg.jobs.as_of(job.id, instant)
        assert as_of.state == DEFINED and as_of.job is not None
        assert dataclasses.replace(as_of.job, waiting_for=()) == dataclasses.replace(
            live, waiting_for=()
        )
    assert [a.outcome for a in hg.jobs.as_of(job.id, seen[1][0]).job.attempt_history] == ["failed"]  # type: ignore[union-attr]
    assert hg.jobs.as_of(job.id, seen[0][0] - 1).state == NOT_YET
    with pytest.raises(NotFound):
        hg.jobs.as_of("no-such-job", seen[0][0])


def _outlined(live: Schedule) -> Schedule:
    """The live schedule as the past shows it: its payload by its outline only."""
    return dataclasses.replace(live, payload=payload_outline(live.payload))
