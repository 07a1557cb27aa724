"""Fleet-wide limits, rate classes, fair share and retry policies from Python,
with a fake clock, on every store: what a host calls and what its jobs do."""

from __future__ import annotations

import pytest

from headgate import EACH_PARTITION, Headgate, JobContext, Retry, ValidationError
from headgate.testing import FakeClock
from tests.conftest import AND_MEMORY
from tests.runtime.conftest import START_MS

pytestmark = AND_MEMORY
MINUTE = 60_000


def test_a_small_partitions_job_starts_next_behind_a_large_backlog(
    hg: Headgate, clock: FakeClock
) -> None:
    ran: list[str] = []

    @hg.handler("report", partition_key="shared")
    def report(job: JobContext) -> None:
        assert isinstance(job.payload, str)
        ran.append(job.payload)

    for n in range(50):
        hg.enqueue("report", f"big-{n}", partition_key="big")
        clock.advance(1)
    small = hg.enqueue("report", "small", partition_key="small")
    plain = hg.enqueue("report", "default-partition")
    assert (small.partition_key, plain.partition_key) == ("small", "shared")
    assert hg.drain().succeeded == 52
    assert ran.index("small") <= 2, ran[:5]
    assert ran.index("default-partition") <= 3, ran[:5]
    assert [name for name in ran if name.startswith("big-")] == [f"big-{n}" for n in range(50)]


def test_jobs_that_waited_are_not_put_behind_a_backlog_that_came_after_them(
    hg: Headgate, clock: FakeClock
) -> None:
    ran: list[str] = []

    @hg.handler("work")
    def work(job: JobContext) -> None:
        assert isinstance(job.payload, str)
        ran.append(job.payload)
        if job.payload == "heavy-15":
            later = clock.now_ms() + MINUTE
            hg.enqueue("work", "light", partition_key="light", run_at_ms=later)
            hg.enqueue("work", "plain", run_at_ms=later)
            hg.enqueue("work", "urgent", partition_key="heavy", priority=5)

    for n in range(30):
        hg.enqueue("work", f"heavy-{n}", partition_key="heavy")
        clock.advance(1)
    hg.limits.set(partition_key=EACH_PARTITION, limit=1)  # heavy's jobs run one by one
    assert hg.drain().succeeded == 31
    hg.limits.clear(partition_key=EACH_PARTITION)
    for n in range(30):
        hg.enqueue("work", f"new-{n}", partition_key="new")
    clock.advance(MINUTE)
    ran.clear()
    assert hg.drain().succeeded == 32
    assert {"light", "plain"} <= set(ran[:3]), ran[:5]


def test_without_partitions_the_claim_order_is_priority_then_run_at(
    hg: Headgate, clock: FakeClock
) -> None:
    ran: list[str] = []
    hg.handler("k")(lambda job: ran.append(str(job.payload)))
    hg.enqueue("k", "later", run_at_ms=START_MS + 10)
    hg.enqueue("k", "first")
    hg.enqueue("k", "urgent", priority=5, run_at_ms=START_MS + 20)
    clock.advance(30)
    hg.drain()
    assert ran == ["urgent", "first", "later"]


def test_a_limit_holds_jobs_pending_and_says_so_until_it_is_raised(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.handler("build")(lambda job: None)
    status = hg.limits.set(queue="default", kind="build", limit=0)
    assert (status.queue, status.kind, status.partition_key, status.limit) == (
        "default",
        "build",
        None,
        0,
    )
    job = hg.enqueue("build")
    assert hg.drain().ran == 0
    held = hg.jobs.get(job.id)
    assert held.state == "pending" and held.attempts == 0
    assert held.waiting_for == ("concurrency limit 0 on queue=default kind=build partition=*any",)
    assert [limit.limit for limit in hg.limits.list()] == [0]
    hg.limits.set(queue="default", kind="build", limit=1)
    assert hg.drain().succeeded == 1
    assert hg.jobs.get(job.id).waiting_for == ()
    assert hg.limits.clear(queue="default", kind="build") is True
    assert hg.limits.clear(queue="default", kind="build") is False
    assert hg.limits.list() == []


def test_a_limit_on_the_kind_named_star_is_not_the_limit_on_every_kind(hg: Headgate) -> None:
    hg.handler("*")(lambda job: None)
    hg.handler("other")(lambda job: None)
    hg.limits.set(kind="*", limit=0)
    hg.limits.set(limit=5)
    assert {(limit.kind, limit.limit) for limit in hg.limits.list()} == {(None, 5), ("*", 0)}
    held, free = hg.enqueue("*"), hg.enqueue("other")
    assert hg.drain().succeeded == 1
    assert hg.jobs.get(free.id).state == "completed"
    assert hg.jobs.get(held.id).waiting_for == (
        'concurrency limit 0 on queue=* kind="*" partition=*any',
    )
    assert hg.limits.clear() is True
    assert [limit.kind for limit in hg.limits.list()] == ["*"]


def test_per_partition_limits_report_the_busiest_partitions(hg: Headgate) -> None:
    hg.limits.set(partition_key=EACH_PARTITION, limit=2)
    [status] = hg.limits.list()
    assert (status.partition_key, status.running, status.running_by_partition) == ("*", 0, ())


def test_a_rate_class_waits_without_spending_an_attempt(hg: Headgate, clock: FakeClock) -> None:
    hg.handler("mail", rate_class="mail-api", max_attempts=1)(lambda job: None)
    rate = hg.rates.set("mail-api", limit=2, per_ms=MINUTE)
    assert (rate.rate_class, rate.limit, rate.per_ms, rate.started) == ("mail-api", 2, MINUTE, 0)
    jobs = []
    for _ in range(3):
        jobs.append(hg.enqueue("mail"))
        clock.advance(1)
    assert hg.drain().succeeded == 2
    waiting = hg.jobs.get(jobs[2].id)
    assert (waiting.state, waiting.attempts, waiting.rate_class) == ("pending", 0, "mail-api")
    assert waiting.waiting_for == ("rate class mail-api: 2 per 60000 ms",)
    assert [r.started for r in hg.rates.list()] == [2]
    clock.advance(MINUTE)
    assert hg.drain().succeeded == 1
    assert hg.rates.clear("mail-api") is True
    assert hg.rates.list() == []


def test_a_widened_or_reset_rate_class_still_counts_its_earlier_starts(
    hg: Headgate, clock: FakeClock
) -> None:
    hg.handler("mail", rate_class="mail-api")(lambda job: None)
    hg.rates.set("mail-api", limit=2, per_ms=MINUTE)
    hg.rates.set("sms-api", limit=1, per_ms=MINUTE)
    hg.enqueue("mail")
    hg.enqueue("mail")
    assert hg.drain().succeeded == 2
    clock.advance(2 * MINUTE)
    assert hg.drain().ran == 0, "a claim after the minute's window has passed"
    widened = hg.rates.set("mail-api", limit=2, per_ms=60 * MINUTE)
    assert widened.started == 2, "both starts fall within the hour"
    held = hg.enqueue("mail")
    assert hg.drain().ran == 0
    assert hg.rates.clear("mail-api") is True
    assert hg.drain().succeeded == 1, "a cleared class starts freely"
    hg.drain()
    reset = hg.rates.set("mail-api", limit=3, per_ms=60 * MINUTE)
    assert reset.started == 2, "starts made while the class was cleared are not counted"
    assert hg.jobs.get(held.id).state == "completed"


def test_a_paused_queue_is_why_a_job_waits(hg: Headgate) -> None:
    job = hg.enqueue("k", queue="reports")
    hg.queues.pause("reports")
    assert hg.jobs.get(job.id).waiting_for == ("queue reports is paused", "no worker is running")
    hg.handler("k", queue="reports")(lambda job: None)
    assert hg.jobs.get(job.id).waiting_for == ("queue reports is paused",), "this process runs it"


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda hg: hg.limits.set(queue="q", limit=-1), "limit"),
        (lambda hg: hg.limits.set(queue="q", limit=True), "limit"),
        (lambda hg: hg.limits.set(queue="bad queue", limit=1), "queue"),
        (lambda hg: hg.limits.set(partition_key="a b", limit=1), "partition_key"),
        (lambda hg: hg.rates.set("mail", limit=0, per_ms=1_000), "limit"),
        (lambda hg: hg.rates.set("mail", limit=1, per_ms=0), "per_ms"),
        (lambda hg: hg.rates.set("a b", limit=1, per_ms=1_000), "rate_class"),
        (lambda hg: hg.enqueue("k", partition_key="*"), "partition_key"),
        (lambda hg: hg.enqueue("k", rate_class=""), "rate_class"),
    ],
)
def test_bad_limits_and_options_name_their_field(hg: Headgate, call: object, field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        call(hg)  # type: ignore[operator]
    assert raised.value.field == field
    assert hg.limits.list() == [] and hg.rates.list() == []


def test_a_retry_policy_fails_at_once_on_what_it_does_not_retry(
    hg: Headgate, clock: FakeClock
) -> None:
    @hg.handler(
        "charge",
        max_attempts=5,
        retry=Retry(on=(ConnectionError, TimeoutError), intervals_s=[5, 30], jitter=False),
    )
    def charge(job: JobContext) -> None:
        if job.payload == "declined":
            raise ValueError("card declined")
        raise ConnectionError("gateway down")

    declined = hg.enqueue("charge", "declined")
    flaky = hg.enqueue("charge", "flaky")
    hg.drain()
    assert (hg.jobs.get(declined.id).state, hg.jobs.get(declined.id).attempts) == ("failed", 1)
    retrying = hg.jobs.get(flaky.id)
    assert retrying.state == "pending" and retrying.run_at_ms == START_MS + 5_000
    clock.advance(5_000)
    hg.drain()
    assert hg.jobs.get(flaky.id).run_at_ms == START_MS + 5_000 + 30_000
    clock.advance(30_000)
    hg.drain()
    assert hg.jobs.get(flaky.id).run_at_ms == START_MS + 35_000 + 30_000, "the last repeats"


def test_fail_on_wins_over_on_and_backoff_is_capped(hg: Headgate, clock: FakeClock) -> None:
    @hg.handler(
        "sync",
        retry=Retry(fail_on=PermissionError, backoff_s=10, max_backoff_s=15, jitter=False),
    )
    def sync(job: JobContext) -> None:
        raise PermissionError("no") if job.payload == "denied" else OSError("later")

    denied, later = hg.enqueue("sync", "denied"), hg.enqueue("sync", "later")
    hg.drain()
    assert hg.jobs.get(denied.id).state == "failed"
    assert hg.jobs.get(later.id).run_at_ms == START_MS + 10_000
    clock.advance(10_000)
    hg.drain()
    assert hg.jobs.get(later.id).run_at_ms == START_MS + 10_000 + 15_000
