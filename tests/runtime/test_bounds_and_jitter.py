"""Start and end bounds, jitter and upcoming runs, through the runtime, on both backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from headgate import Headgate, RuntimeConfig, UpcomingRun, ValidationError
from headgate._domain.spec import MAX_INSTANT_MS
from headgate._domain.tick_timing import jitter_delay_ms
from headgate.testing import FakeClock
from tests.conftest import AND_MEMORY
from tests.runtime.conftest import START_MS, fire, jobs_for

MINUTE = 60_000
ON_TIME = RuntimeConfig(lease_ttl_ms=60_000, prepare_ahead_ms=0)
"""Fires what is due when asked, never ahead: each instant is reached by the test."""
REPO = Path(__file__).resolve().parents[2]


def _utc(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def _recorded(hg: Headgate, schedule_id: str) -> list[tuple[int, int]]:
    """(tick, recorded at) of every enqueued attempt, oldest first."""
    events = hg.schedules.enqueue_events(schedule_id, limit=100).events
    return [(e.tick_ms, e.recorded_at_ms) for e in reversed(events) if e.outcome == "enqueued"]


def _fire_each_at_its_instant(
    hg: Headgate, clock: FakeClock, schedule_id: str, runs: list[UpcomingRun]
) -> None:
    """For each run: a millisecond before its instant nothing fires; at it, its tick does."""
    for run in runs:
        clock.set(run.due_at_ms - 1)
        fire(hg)
        assert run.tick_ms not in jobs_for(hg, schedule_id), f"{run} fired early"
        clock.set(run.due_at_ms)
        fire(hg)
        assert jobs_for(hg, schedule_id)[-1] == run.tick_ms, f"{run} did not fire at its instant"


@AND_MEMORY
def test_a_start_in_a_skipped_hour_begins_at_the_first_tick_that_exists(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    """New York springs forward at 02:00 EST (07:00Z) to 03:00 EDT: 02:30 never exists."""
    hg = make_headgate(ON_TIME)
    clock.set(_utc("2024-03-10T05:00"))
    spec = "CRON_TZ=America/New_York 30 * * * *"
    schedule = hg.schedules.put("s", spec=spec, kind="k", start_at_ms=_utc("2024-03-10T07:00"))
    assert schedule.next_run_ms == _utc("2024-03-10T07:30")  # 03:30 EDT, not 01:30 EST
    assert schedule.start_at_ms == _utc("2024-03-10T07:00")
    clock.set(_utc("2024-03-10T07:10"))
    fire(hg)
    assert jobs_for(hg, "s") == []
    clock.set(_utc("2024-03-10T07:30"))
    fire(hg)
    assert jobs_for(hg, "s") == [_utc("2024-03-10T07:30")]


@AND_MEMORY
def test_a_start_at_a_tick_fires_that_tick(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hg = make_headgate(ON_TIME)
    start = START_MS + 10 * MINUTE
    assert hg.schedules.put("s", spec="* * * * *", kind="k", start_at_ms=start).next_run_ms == start


@AND_MEMORY
def test_an_end_in_the_repeated_hour_finishes_the_schedule_and_the_sweep_stops_reading_it(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    """New York falls back at 02:00 EDT (06:00Z) to 01:00 EST: 01:00 and 01:30 repeat and
    fire once. With the end at 01:45 EST, the tick after 01:30 EDT is 02:00 EST: past it."""
    hg = make_headgate(ON_TIME)
    clock.set(_utc("2024-11-03T04:45"))
    spec = "CRON_TZ=America/New_York 0,30 * * * *"
    hg.schedules.put("s", spec=spec, kind="k", end_at_ms=_utc("2024-11-03T06:45"))
    runs = hg.schedules.upcoming("s", count=10)
    assert [run.tick_ms for run in runs] == [_utc("2024-11-03T05:00"), _utc("2024-11-03T05:30")]
    _fire_each_at_its_instant(hg, clock, "s", runs)
    schedule = hg.schedules.get("s")
    assert schedule.finished and schedule.next_due_at_ms is None
    assert schedule.next_run_ms == _utc("2024-11-03T07:00")
    assert hg.schedules.upcoming("s") == []
    assert hg._core.store.reads.due_schedules(MAX_INSTANT_MS, 10) == []
    assert hg._core.store.reads.earliest_due_at() is None
    clock.set(_utc("2024-11-04T00:00"))
    fire(hg)
    assert jobs_for(hg, "s") == [_utc("2024-11-03T05:00"), _utc("2024-11-03T05:30")]


@AND_MEMORY
def test_an_end_passed_while_down_fires_the_policy_s_ticks_up_to_it_then_finishes(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hg = make_headgate(ON_TIME)
    end = START_MS + 10 * MINUTE
    hg.schedules.put(
        "b", spec="* * * * *", kind="k", on_missed="backfill", backfill_max=3, end_at_ms=end
    )
    clock.advance(60 * MINUTE)
    fire(hg)
    assert jobs_for(hg, "b") == [end - 2 * MINUTE, end - MINUTE, end]
    assert hg.schedules.get("b").finished


@AND_MEMORY
def test_a_later_end_reopens_a_finished_schedule(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hg = make_headgate(ON_TIME)
    hg.schedules.put("s", spec="* * * * *", kind="k", end_at_ms=START_MS + MINUTE)
    clock.set(START_MS + MINUTE)
    fire(hg)
    assert hg.schedules.get("s").finished
    reopened = hg.schedules.put("s", spec="* * * * *", kind="k", end_at_ms=START_MS + 3 * MINUTE)
    assert not reopened.finished and reopened.next_run_ms == START_MS + 2 * MINUTE
    clock.set(START_MS + 3 * MINUTE)
    fire(hg)
    assert hg.schedules.get("s").finished


@AND_MEMORY
def test_a_start_dropped_or_moved_earlier_brings_the_schedule_back_now(
    hg: Headgate, clock: FakeClock
) -> None:
    day = 86_400_000
    hg.schedules.put("s", spec="@every:60000", kind="k", start_at_ms=START_MS + 30 * day)
    assert hg.schedules.get("s").next_run_ms == START_MS + 30 * day
    clock.advance(5 * MINUTE + 1)
    earlier = hg.schedules.put("s", spec="@every:60000", kind="k", start_at_ms=START_MS + day)
    assert earlier.next_run_ms == START_MS + day
    dropped = hg.schedules.put("s", spec="@every:60000", kind="k")
    assert dropped.next_run_ms == START_MS + 6 * MINUTE
    later = hg.schedules.put("s", spec="@every:60000", kind="k", start_at_ms=START_MS + 2 * day)
    assert later.next_run_ms == START_MS + 2 * day
    assert hg.schedules.upcoming("s", 1)[0].tick_ms == START_MS + 2 * day


@AND_MEMORY
def test_bounds_and_jitter_are_validated_naming_the_field_and_the_rule(hg: Headgate) -> None:
    cases: list[tuple[dict[str, object], str]] = [
        ({"start_at_ms": 10, "end_at_ms": 10}, "end_at_ms: must be after start_at_ms (10), got 10"),
        ({"start_at_ms": -1}, "start_at_ms: must be an integer of epoch ms"),
        ({"end_at_ms": True}, "end_at_ms: must be an integer of epoch ms"),
        ({"jitter_ms": 3_600_001}, "jitter_ms: must be an integer from 0 to 3600000 (an hour)"),
        ({"jitter_ms": -1}, "jitter_ms: must be an integer from 0 to 3600000"),
        (
            {"start_at_ms": START_MS + 1, "end_at_ms": START_MS + 30_000},
            "end_at_ms: no tick of '* * * * *' falls from start_at_ms to end_at_ms",
        ),
    ]
    for fields, message in cases:
        with pytest.raises(ValidationError) as caught:
            hg.schedules.put("s", spec="* * * * *", kind="k", **fields)  # type: ignore[arg-type]
        assert str(caught.value).startswith(message), fields
    with pytest.raises(Exception, match="no schedule"):
        hg.schedules.get("s")


@AND_MEMORY
def test_upcoming_runs_are_what_then_fires_at_their_jittered_instants_and_nothing_is_late(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hg = make_headgate(ON_TIME)
    start, end = START_MS + 5 * MINUTE, START_MS + 9 * MINUTE
    hg.schedules.put(
        "j", spec="* * * * *", kind="k", start_at_ms=start, end_at_ms=end, jitter_ms=30_000
    )
    runs = hg.schedules.upcoming("j", count=10)
    assert [run.tick_ms for run in runs] == [start + n * MINUTE for n in range(5)]
    delays = [run.due_at_ms - run.tick_ms for run in runs]
    assert all(0 <= delay < 30_000 for delay in delays) and len(set(delays)) > 1
    assert delays == [jitter_delay_ms("j", run.tick_ms, 30_000) for run in runs]
    assert hg.schedules.get("j").next_due_at_ms == runs[0].due_at_ms
    _fire_each_at_its_instant(hg, clock, "j", runs)
    assert _recorded(hg, "j") == [(run.tick_ms, run.due_at_ms) for run in runs]
    registry = hg.metrics.registry
    assert registry.get_sample_value("headgate_tick_lateness_seconds_count") == len(runs)
    assert registry.get_sample_value("headgate_tick_lateness_seconds_sum") == 0
    assert hg.schedules.get("j").finished


@AND_MEMORY
def test_upcoming_is_empty_while_paused_and_comes_back_on_resume(hg: Headgate) -> None:
    hg.schedules.put("p", spec="@every:60000", kind="k", jitter_ms=5_000)
    before = hg.schedules.upcoming("p", count=3)
    assert len(before) == 3
    hg.schedules.pause("p")
    assert hg.schedules.upcoming("p") == []
    resumed = hg.schedules.resume("p")
    assert (resumed.jitter_ms, resumed.next_due_at_ms) == (5_000, before[0].due_at_ms)
    assert hg.schedules.upcoming("p", count=3) == before
    with pytest.raises(ValidationError, match="count: must be an integer from 1 to 100"):
        hg.schedules.upcoming("p", count=0)


@AND_MEMORY
def test_a_respelt_macro_keeps_its_phase(hg: Headgate, clock: FakeClock) -> None:
    first = hg.schedules.put("m", spec="0 0 * * *", kind="k")
    clock.advance(MINUTE)
    again = hg.schedules.put("m", spec="@daily", kind="k")
    assert (again.spec, again.next_run_ms) == ("0 0 * * *", first.next_run_ms)
    zoned = hg.schedules.put("z", spec="CRON_TZ=Europe/Paris @weekly", kind="k")
    assert zoned.spec == "CRON_TZ=Europe/Paris 0 0 * * 0"


_UPCOMING_IN_A_CHILD = """
import json, sys
from headgate import Headgate
hg = Headgate(sys.argv[1])
print(json.dumps([list(run) for run in hg.schedules.upcoming("j", count=20)]))
hg.close()
"""


@pytest.mark.processes
def test_jitter_is_the_same_in_another_process_and_after_a_failover(
    store_url: str, make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    """Another interpreter (its own hash seed) computes the same instants; a second
    runtime that takes over mid-schedule fires at them too."""
    first = make_headgate(ON_TIME)
    first.schedules.put("j", spec="* * * * *", kind="k", jitter_ms=45_000)
    runs = first.schedules.upcoming("j", count=20)
    environment = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "12345"}
    child = subprocess.run(
        [sys.executable, "-c", _UPCOMING_IN_A_CHILD, store_url],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=True,
    )
    assert [UpcomingRun(*run) for run in json.loads(child.stdout)] == runs
    first.start()
    _fire_each_at_its_instant(first, clock, "j", runs[:3])
    first.stop()  # gives the lease back: the second takes over at once
    second = make_headgate(ON_TIME)
    second.start()
    _fire_each_at_its_instant(second, clock, "j", runs[3:6])
    assert _recorded(second, "j") == [(run.tick_ms, run.due_at_ms) for run in runs[:6]]
