"""The activity roll-up, with a fake clock, on every store: each closed minute's
ticks, jobs and latencies, and what stood when it was rolled up."""

from __future__ import annotations

from collections import defaultdict

import pytest

from headgate import ActivityPoint, Headgate, JobContext, Snooze, ValidationError
from headgate._domain.activity import KEEP_MS, MINUTE_MS, minute_of
from headgate.testing import FakeClock, roll_up_activity
from tests.conftest import AND_MEMORY
from tests.runtime.conftest import START_MS, fire

pytestmark = AND_MEMORY


def _by_minute(points: list[ActivityPoint]) -> dict[int, dict[tuple[str, str], float]]:
    found: dict[int, dict[tuple[str, str], float]] = defaultdict(dict)
    for point in points:
        found[point.minute_ms][(point.series, point.key)] = point.value
    return found


def test_a_closed_minute_is_rolled_up_once_with_its_ticks_jobs_and_queues(
    hg: Headgate, clock: FakeClock
) -> None:
    minute = minute_of(START_MS)
    hg.schedules.put("pulse", spec="@every:10s", kind="pulse")
    hg.start(workers=False)
    snoozed: set[str] = set()

    @hg.handler("pulse")
    def pulse(job: JobContext) -> None:
        if job.id not in snoozed and len(snoozed) < 1:
            snoozed.add(job.id)
            raise Snooze(600)

    @hg.handler("fails", max_attempts=1)
    def fails(job: JobContext) -> None:
        raise RuntimeError("no")

    hg.handler("late", start_within_ms=1_000)(lambda job: None)
    hg.enqueue("fails")
    hg.enqueue("late")
    hg.limits.set(queue="reports", limit=3)
    hg.enqueue("report.build", queue="reports")  # nobody serves it: it waits
    for _ in range(5):
        clock.advance(10_000)
        fire(hg)
        clock.advance(100)
        hg.drain(queues=["default"])
    clock.advance(MINUTE_MS)  # the first minute has closed, with its grace
    assert minute in {*roll_up_activity(hg), *_rolled_by_the_scheduler(hg, minute)}
    assert roll_up_activity(hg) == [], "a minute is rolled up once"
    points = _by_minute(hg.metrics.activity(since_ms=minute))[minute]
    assert points[("ticks", "enqueued")] == 5
    assert points[("ticks", "skipped")] == 0
    assert points[("jobs", "succeeded")] == 4
    assert points[("jobs", "snoozed")] == 1
    assert points[("jobs", "failed")] == 1
    assert points[("jobs", "expired")] == 1
    assert points[("jobs", "started")] == 6
    assert points[("tick_lateness_ms", "p50")] == 200, "each tick fired 100 ms later than the last"
    assert points[("tick_lateness_ms", "p99")] == 400
    assert points[("pickup_ms", "p99")] >= 100
    assert points[("queue_depth", "reports")] == 1
    assert points[("oldest_pending_s", "reports")] > 60
    assert points[("limit", "queue=reports kind=* partition=*any")] == 3
    assert points[("limit_running", "queue=reports kind=* partition=*any")] == 0


def _rolled_by_the_scheduler(hg: Headgate, minute: int) -> set[int]:
    """The minutes already rolled up (the scheduler's own duty may have got there)."""
    return {point.minute_ms for point in hg.metrics.activity(since_ms=minute)}


def test_a_quiet_minute_is_zeros_and_a_day_is_kept(hg: Headgate, clock: FakeClock) -> None:
    clock.advance(2 * MINUTE_MS)
    assert len(roll_up_activity(hg)) == 1, "a store's first roll-up: the minute closed last"
    clock.advance(2 * MINUTE_MS)
    first = roll_up_activity(hg)
    assert len(first) == 2
    points = _by_minute(hg.metrics.activity(since_ms=0))
    assert points[first[-1]][("ticks", "enqueued")] == 0
    assert ("tick_lateness_ms", "p50") not in points[first[-1]], "no ticks, no percentile"
    clock.advance(KEEP_MS + 10 * MINUTE_MS)
    rolled = roll_up_activity(hg)
    assert len(rolled) == 5, "after a gap, only the last few minutes are rolled up"
    kept = {point.minute_ms for point in hg.metrics.activity(since_ms=0)}
    assert kept == set(rolled), "points older than a day are dropped"


@pytest.mark.parametrize("since_ms", [-1, 2**63])
def test_activity_refuses_a_bad_since(hg: Headgate, since_ms: int) -> None:
    with pytest.raises(ValidationError) as raised:
        hg.metrics.activity(since_ms=since_ms)
    assert raised.value.field == "since_ms"


def test_a_job_running_across_a_roll_up_counts_as_started_once(
    hg: Headgate, clock: FakeClock
) -> None:
    clock.set(minute_of(START_MS) + MINUTE_MS)
    started_in = clock.now_ms()

    @hg.handler("long")
    def long(job: JobContext) -> None:
        clock.advance(MINUTE_MS + 10_000)
        assert started_in in roll_up_activity(hg), "rolled up while the job runs"

    hg.enqueue("long")
    assert hg.drain().succeeded == 1
    clock.advance(MINUTE_MS)
    ended_in = started_in + MINUTE_MS
    assert ended_in in roll_up_activity(hg)
    points = _by_minute(hg.metrics.activity(since_ms=started_in))
    assert points[started_in][("jobs", "started")] == 1
    assert points[started_in][("jobs", "succeeded")] == 0
    assert points[ended_in][("jobs", "started")] == 0
    assert points[ended_in][("jobs", "succeeded")] == 1
