"""Overlap policies and start deadlines, with a fake clock, on every store.

A handler run by `drain` in this thread fires the scheduler from inside its
run, so "a tick comes due while the previous job runs" is exact, not timed.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from headgate import Headgate, JobContext, ValidationError
from headgate.testing import FakeClock
from tests.conftest import AND_MEMORY
from tests.runtime.conftest import START_MS, fire, jobs_for

pytestmark = AND_MEMORY
STEP = 1_000
"""Ticks a second apart: a handler can let one come due within its own timeout
and the scheduler's lease."""
MINUTE = 60_000
T1, T2, T3, T4 = (START_MS + n * STEP for n in range(1, 5))


def _records(hg: Headgate, schedule_id: str) -> list[tuple[int, str, str]]:
    """(tick, outcome, reason) of every attempt, oldest first."""
    events = hg.schedules.enqueue_events(schedule_id, limit=100).events
    return [(e.tick_ms, e.outcome, e.reason) for e in reversed(events)]


def _state(hg: Headgate, schedule_id: str, tick_ms: int) -> str:
    [job] = [
        job
        for job in hg.jobs.list(schedule_id=schedule_id, limit=100).jobs
        if job.periodic_origin is not None and job.periodic_origin.tick_ms == tick_ms
    ]
    return job.state


def _tick_inside(clock: FakeClock, hg: Headgate) -> Callable[[], None]:
    def tick() -> None:
        clock.advance(STEP)
        fire(hg)

    return tick


def test_skip_records_ticks_skipped_while_the_previous_job_waits_or_runs(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("s", spec="@every:1000", kind="k", overlap="skip")
    hg.start(workers=False)  # jobs run only when drained, in this thread
    ran: list[int] = []

    @hg.handler("k")
    def run(job: JobContext) -> None:
        assert job.periodic_origin is not None
        ran.append(job.periodic_origin.tick_ms)
        if job.periodic_origin.tick_ms == T1:
            _tick_inside(clock, hg)()  # T3 comes due while T1 runs

    clock.advance(STEP)
    fire(hg)
    clock.advance(STEP)
    fire(hg)  # T2: T1 still waits
    hg.drain()
    clock.advance(STEP)
    fire(hg)  # T4: nothing waits or runs
    assert _records(hg, "s") == [
        (T1, "enqueued", "accepted"),
        (T2, "skipped", "overlap"),
        (T3, "skipped", "overlap"),
        (T4, "enqueued", "accepted"),
    ]
    assert jobs_for(hg, "s") == [T1, T4]
    assert ran == [T1]
    assert hg.schedules.get("s").next_run_ms == T4 + STEP, "every skipped tick advanced it"


def test_a_backfill_under_skip_is_one_job_and_a_record_per_tick(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put(
        "b", spec="@every:1000", kind="k", on_missed="backfill", backfill_max=4, overlap="skip"
    )
    hg.start(workers=False)  # jobs run only when drained, in this thread
    clock.advance(4 * STEP)
    fire(hg)
    assert _records(hg, "b") == [
        (T1, "enqueued", "accepted"),
        (T2, "skipped", "overlap"),
        (T3, "skipped", "overlap"),
        (T4, "skipped", "overlap"),
    ]
    assert jobs_for(hg, "b") == [T1]


def test_buffer_one_keeps_one_job_waiting_behind_the_running_one_and_runs_it_after(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("b", spec="@every:1000", kind="k", overlap="buffer_one")
    hg.start(workers=False)  # jobs run only when drained, in this thread
    ran: list[tuple[str, int]] = []
    claimable_while_t1_ran: list[int | None] = []

    @hg.handler("k")
    def run(job: JobContext) -> None:
        assert job.periodic_origin is not None
        tick = job.periodic_origin.tick_ms
        ran.append(("start", tick))
        if tick == T1:
            _tick_inside(clock, hg)()  # T3: buffered behind T1
            _tick_inside(clock, hg)()  # T4: one already waits
            claimable_while_t1_ran.append(
                hg._core.store.reads.earliest_claimable(["default"], ["k"])
            )
        ran.append(("end", tick))

    clock.advance(STEP)
    fire(hg)
    clock.advance(STEP)
    fire(hg)  # T2: T1 waits, and one waiting is all buffer_one keeps
    hg.drain()
    assert _records(hg, "b") == [
        (T1, "enqueued", "accepted"),
        (T2, "skipped", "overlap"),
        (T3, "enqueued", "accepted"),
        (T4, "skipped", "overlap"),
    ]
    assert claimable_while_t1_ran == [None], "the buffered job waits for the running one"
    assert ran == [("start", T1), ("end", T1), ("start", T3), ("end", T3)]


def test_cancel_previous_cancels_the_waiting_or_running_job_and_runs_the_new_one(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("c", spec="@every:1000", kind="k", overlap="cancel_previous")
    hg.start(workers=False)  # jobs run only when drained, in this thread
    told: list[bool] = []

    @hg.handler("k")
    def run(job: JobContext) -> str:
        assert job.periodic_origin is not None
        if job.periodic_origin.tick_ms == T2:
            _tick_inside(clock, hg)()  # T3 cancels T2, which is running
            told.append(hg.jobs.get(job.id).state == "cancelled")
        return "done"

    clock.advance(STEP)
    fire(hg)
    clock.advance(STEP)
    fire(hg)  # T2 cancels T1, still waiting
    assert _state(hg, "c", T1) == "cancelled"
    hg.drain()
    assert _records(hg, "c") == [
        (T1, "enqueued", "accepted"),
        (T2, "enqueued", "accepted"),
        (T3, "enqueued", "accepted"),
    ]
    assert told == [True]
    assert [_state(hg, "c", tick) for tick in (T1, T2, T3)] == [
        "cancelled",
        "cancelled",
        "completed",
    ], "only the previous run is cancelled, and its handler's return is not recorded"


def test_a_backfill_under_cancel_previous_enqueues_only_the_newest_tick(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put(
        "c",
        spec="@every:1000",
        kind="k",
        on_missed="backfill",
        backfill_max=3,
        overlap="cancel_previous",
    )
    hg.start(workers=False)  # jobs run only when drained, in this thread
    clock.advance(3 * STEP)
    fire(hg)
    assert _records(hg, "c") == [
        (T1, "skipped", "overlap"),
        (T2, "skipped", "overlap"),
        (T3, "enqueued", "accepted"),
    ]
    assert jobs_for(hg, "c") == [T3]


def test_manual_runs_neither_hold_back_ticks_nor_are_held_back(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("m", spec="@every:1000", kind="k", overlap="skip")
    hg.start(workers=False)  # jobs run only when drained, in this thread
    manual = hg.schedules.enqueue_now("m", "by-hand").job_id
    clock.advance(STEP)
    fire(hg)
    second = hg.schedules.enqueue_now("m", "again").job_id
    assert _records(hg, "m") == [(T1, "enqueued", "accepted")]
    assert {hg.jobs.get(manual).state, hg.jobs.get(second).state} == {"pending"}


def test_allow_is_the_default_and_lets_ticks_pile_up(hg: Headgate, clock: FakeClock) -> None:
    hg.schedules.put("a", spec="@every:1000", kind="k")
    hg.start(workers=False)  # jobs run only when drained, in this thread
    assert hg.schedules.get("a").overlap == "allow"
    for _ in range(3):
        clock.advance(STEP)
        fire(hg)
    assert jobs_for(hg, "a") == [T1, T2, T3]


def test_an_unknown_overlap_policy_is_refused_by_name(hg: Headgate) -> None:
    with pytest.raises(ValidationError, match="overlap") as raised:
        hg.schedules.put("x", spec="@every:1000", kind="k", overlap="sometimes")
    assert "allow, skip, buffer_one, cancel_previous" in str(raised.value)
    with pytest.raises(ValidationError, match="start_within_ms"):
        hg.schedules.put("x", spec="@every:1000", kind="k", start_within_ms=0)
    assert hg.schedules.list().schedules == []


def test_a_tick_job_not_started_within_its_deadline_expires_instead_of_running(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("d", spec="@every:60000", kind="k", start_within_ms=30_000)
    hg.start(workers=False)  # jobs run only when drained, in this thread
    ran: list[str] = []
    hg.handler("k")(lambda job: ran.append(job.id))
    clock.advance(MINUTE)
    fire(hg)
    [job] = hg.jobs.list(schedule_id="d").jobs
    assert job.start_by_ms == START_MS + MINUTE + 30_000
    clock.advance(30_001)
    summary = hg.drain()
    assert summary.ran == 0 and ran == []
    expired = hg.jobs.get(job.id)
    assert expired.state == "expired" and expired.attempt_history == ()
    assert _records(hg, "d") == [(START_MS + MINUTE, "enqueued", "accepted")], (
        "the tick itself was enqueued"
    )
    retried = hg.jobs.retry(job.id)
    assert retried.state == "pending" and retried.start_by_ms is None
    assert hg.drain().succeeded == 1 and ran == [job.id]


def test_a_job_started_within_its_deadline_runs_and_keeps_no_deadline_after(
    hg: Headgate, clock: FakeClock
) -> None:
    failures: list[str] = []

    @hg.handler("k", start_within_ms=10_000)
    def run(job: JobContext) -> None:
        if not failures:
            failures.append(job.id)
            raise RuntimeError("once")

    job = hg.enqueue("k")
    assert job.start_within_ms == 10_000 and job.start_by_ms == START_MS + 10_000
    clock.advance(10_000)
    assert hg.drain().retrying == 1
    assert hg.jobs.get(job.id).start_by_ms is None, (
        "a retry is not held to the first start's deadline"
    )
    clock.advance(60_000)
    assert hg.drain().succeeded == 1
