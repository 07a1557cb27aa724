"""Missed-run policies across downtime, with a fake clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import func, select

from headgate import EnqueueHook, Headgate, RuntimeConfig, TickContext
from headgate._domain.admission import AdmissionLimits
from headgate._store.sql.schema import LIVE
from headgate.testing import FakeClock, finish_job
from tests.conftest import AND_MEMORY
from tests.runtime.conftest import START_MS, FaultyHeadgate, fire, jobs_for

MINUTE = 60_000


def _job_count(hg: Headgate, schedule_id: str) -> dict[int, int]:
    jobs = LIVE.jobs
    with hg._core.store.engine.connect() as connection:
        rows = connection.execute(
            select(jobs.c.periodic_tick_ms, func.count())
            .where(jobs.c.periodic_schedule_id == schedule_id)
            .group_by(jobs.c.periodic_tick_ms)
        ).all()
    return {int(tick): int(count) for tick, count in rows}


def test_skip_fires_only_the_latest_missed_tick(hg: Headgate, clock: FakeClock) -> None:
    hg.schedules.put("s", spec="@every:60000", kind="k", on_missed="skip")
    clock.advance(10 * MINUTE + 5_000)
    fire(hg)
    assert jobs_for(hg, "s") == [START_MS + 10 * MINUTE]
    assert hg.schedules.get("s").next_run_ms == START_MS + 11 * MINUTE
    assert _job_count(hg, "s") == {START_MS + 10 * MINUTE: 1}


@AND_MEMORY
def test_run_once_fires_one_catch_up_job(hg: Headgate, clock: FakeClock) -> None:
    hg.schedules.put("r", spec="* * * * *", kind="k", on_missed="run_once")
    clock.advance(30 * MINUTE)
    fire(hg)
    assert jobs_for(hg, "r") == [START_MS + 30 * MINUTE]
    assert hg.schedules.get("r").next_run_ms == START_MS + 31 * MINUTE


@AND_MEMORY
def test_backfill_fires_the_n_most_recent_oldest_first(hg: Headgate, clock: FakeClock) -> None:
    hg.schedules.put("b", spec="@every:60000", kind="k", on_missed="backfill", backfill_max=5)
    clock.advance(10 * MINUTE)
    fire(hg)
    events = hg.schedules.enqueue_events("b", limit=100).events
    assert [e.tick_ms for e in reversed(events)] == [START_MS + n * MINUTE for n in range(6, 11)]
    assert [e.event_id for e in reversed(events)] == sorted(e.event_id for e in events)
    assert hg.schedules.get("b").next_run_ms == START_MS + 11 * MINUTE


@AND_MEMORY
def test_the_latest_tick_is_exact_after_years_down(hg: Headgate, clock: FakeClock) -> None:
    hg.schedules.put("m", spec="* * * * *", kind="k", on_missed="skip")
    clock.advance(10 * 365 * 86_400_000 + 37_000)
    fire(hg)
    (tick,) = jobs_for(hg, "m")
    assert tick == (clock.now_ms() // MINUTE) * MINUTE


def test_backfill_failing_half_way_resumes_without_repeats(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    limits = AdmissionLimits(queue_limits={"tight": 3})
    hg = make_headgate(RuntimeConfig(lease_ttl_ms=600_000, limits=limits))
    hg.schedules.put(
        "b", spec="@every:60000", kind="k", queue="tight", on_missed="backfill", backfill_max=5
    )
    clock.advance(5 * MINUTE)
    fire(hg)
    assert jobs_for(hg, "b") == [START_MS + n * MINUTE for n in (1, 2, 3)]
    newest = hg.schedules.enqueue_events("b", limit=1).events[0]
    assert (newest.outcome, newest.reason, newest.tick_ms) == (
        "failed",
        "backpressure",
        START_MS + 4 * MINUTE,
    )
    schedule = hg.schedules.get("b")
    assert schedule.next_run_ms == START_MS + 4 * MINUTE
    assert schedule.retry_at_ms == clock.now_ms() + 1_000
    for event in hg.schedules.enqueue_events("b", limit=10).events:
        if event.outcome == "enqueued":
            finish_job(hg, event.job_id)
    clock.advance(2_000)
    fire(hg)
    assert jobs_for(hg, "b") == [START_MS + n * MINUTE for n in (1, 2, 3, 4, 5)]
    assert all(count == 1 for count in _job_count(hg, "b").values())
    assert hg.schedules.get("b").next_run_ms == START_MS + 6 * MINUTE


@AND_MEMORY
def test_a_backlog_bigger_than_one_sweep_is_drained(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hg = make_headgate(RuntimeConfig(lease_ttl_ms=600_000, sweep_batch=7, shards=3))
    for n in range(40):
        hg.schedules.put(f"s{n:02}", spec="@every:60000", kind="k")
    clock.advance(MINUTE)
    fire(hg)
    assert all(jobs_for(hg, f"s{n:02}") == [START_MS + MINUTE] for n in range(40))


def test_a_large_backfill_is_fired_in_bounded_batches_each_tick_once(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hg = make_headgate(RuntimeConfig(lease_ttl_ms=600_000, max_ticks_per_batch=20))
    hg.schedules.put("b", spec="@every:60000", kind="k", on_missed="backfill", backfill_max=50)
    hg.schedules.put("neighbour", spec="@every:60000", kind="k")
    clock.advance(60 * MINUTE)
    fire(hg)
    assert _job_count(hg, "b") == {START_MS + n * MINUTE: 1 for n in range(11, 61)}
    assert jobs_for(hg, "neighbour") == [START_MS + 60 * MINUTE]
    assert hg.schedules.get("b").next_run_ms == START_MS + 61 * MINUTE


@AND_MEMORY
@pytest.mark.parametrize(
    ("on_missed", "expected_minutes"),
    [("skip", [10]), ("run_once", [10]), ("backfill", [8, 9, 10])],
)
def test_resuming_a_paused_schedule_follows_its_missed_run_policy(
    hg: Headgate, clock: FakeClock, on_missed: str, expected_minutes: list[int]
) -> None:
    """A pause is downtime of one schedule: resumed, it fires what its policy
    fires after downtime, from the phase it kept."""
    hg.schedules.put("p", spec="@every:60000", kind="k", on_missed=on_missed, backfill_max=3)
    clock.advance(MINUTE)
    fire(hg)
    assert hg.schedules.pause("p").paused
    clock.advance(9 * MINUTE + 5_000)
    fire(hg)
    assert jobs_for(hg, "p") == [START_MS + MINUTE]  # nothing while paused
    resumed = hg.schedules.resume("p")
    assert (resumed.paused, resumed.next_run_ms) == (False, START_MS + 2 * MINUTE)
    fire(hg)
    assert jobs_for(hg, "p") == [START_MS + m * MINUTE for m in [1, *expected_minutes]]
    assert hg.schedules.get("p").next_run_ms == START_MS + 11 * MINUTE


@AND_MEMORY
def test_pausing_twice_or_resuming_a_running_schedule_writes_nothing(hg: Headgate) -> None:
    hg.schedules.put("p", spec="@every:60000", kind="k")
    head = hg._core.store.log.head()
    hg.schedules.resume("p")
    assert hg._core.store.log.head() == head
    hg.schedules.pause("p")
    hg.schedules.pause("p")
    assert hg._core.store.log.head() == head + 1


@AND_MEMORY
def test_a_schedule_resumed_while_the_scheduler_looks_ahead_keeps_its_policy(
    make_faulty: Callable[..., FaultyHeadgate], clock: FakeClock
) -> None:
    """Resumed between the sweep that found nothing due and the read of the next
    instant, a schedule's old phase is in the past: it fires as due now, under
    `skip`, never as an instant prepared ahead (which fired its oldest missed tick)."""
    hg, faults = make_faulty()
    hg.schedules.put("p", spec="@every:60000", kind="k", on_missed="skip")
    clock.advance(MINUTE)
    fire(hg)
    hg.schedules.pause("p")
    clock.advance(9 * MINUTE + 5_000)

    def resume_once() -> None:
        faults.before_earliest_due_read = None
        hg.schedules.resume("p")

    faults.before_earliest_due_read = resume_once
    fire(hg)
    fire(hg)
    assert jobs_for(hg, "p") == [START_MS + MINUTE, START_MS + 10 * MINUTE]


@AND_MEMORY
@pytest.mark.parametrize("change", ["pause", "redefine", "delete"])
def test_a_schedule_changed_while_its_catch_up_is_planned_fires_none_of_that_plan(
    make_headgate: Callable[..., Headgate], clock: FakeClock, change: str
) -> None:
    """A backfill's ticks are chained on the schedule stream's version. A change that
    lands between the plan's read and its write (another process pauses it, say)
    must void the whole plan: it used to fail only the first tick, whose version
    the change took, and write the rest one version on, as if nothing had changed."""

    class ChangeOnce(EnqueueHook):
        changed = False

        def before_enqueue(self, context: TickContext) -> None:
            if self.changed:
                return
            self.changed = True  # the planner has read the row; its write is to come
            if change == "pause":
                hg.schedules.pause("b")
            elif change == "redefine":
                hg.schedules.put("b", spec="@every:120000", kind="k2", on_missed="backfill")
            else:
                hg.schedules.delete("b")

    hg = make_headgate(hooks=[ChangeOnce()])
    hg.schedules.put("b", spec="@every:60000", kind="k", on_missed="backfill", backfill_max=10)
    clock.advance(5 * MINUTE + 5_000)
    fire(hg)
    fire(hg)  # whatever the change left due fires now, under the schedule as changed
    assert jobs_for(hg, "b") == [], "ticks planned before the change were written after it"
    if change == "pause":
        assert hg.schedules.get("b").next_run_ms == START_MS + MINUTE
        hg.schedules.resume("b")
        fire(hg)
        assert jobs_for(hg, "b") == [START_MS + n * MINUTE for n in range(1, 6)]
    elif change == "redefine":
        assert hg.schedules.get("b").next_run_ms == START_MS + 6 * MINUTE
