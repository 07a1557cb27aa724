"""A worker claims the work its own writes make due soon when it is due, not at
its next poll: a job it snoozed or retried, and jobs a used-up rate class
passed over, once the class's window frees a start. Polling is set to a
two seconds, so a worker that waited for it would fail. On the real clock, on each
backend (on PostgreSQL nothing else wakes it: its own commits send no
notification it hears).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from headgate import Headgate, JobContext, Retry, RuntimeConfig, Snooze, WorkerConfig

POLL = WorkerConfig(poll_interval_ms=2_000)
"""A worker that waited for its poll would take two seconds: the bounds below are
well under it, and well over what a loaded machine adds."""


@pytest.fixture
def hg(store_url: str) -> Iterator[Headgate]:
    made = Headgate(store_url, config=RuntimeConfig(lease_ttl_ms=2_000))
    yield made
    made.close()


def _wait_for(hg: Headgate, job_id: str, state: str, within_s: float = 15) -> None:
    ends = time.monotonic() + within_s
    while hg.jobs.get(job_id).state != state:
        assert time.monotonic() < ends, hg.jobs.get(job_id).state
        time.sleep(0.01)


def test_a_snoozed_job_runs_again_when_its_snooze_ends(hg: Headgate) -> None:
    ran: list[float] = []

    @hg.handler("nap")
    def nap(job: JobContext) -> None:
        ran.append(time.monotonic())
        if job.snoozes == 0:
            raise Snooze(0.1)

    hg.start(POLL, scheduler=False)
    job = hg.enqueue("nap")
    _wait_for(hg, job.id, "completed")
    assert 0.1 <= ran[1] - ran[0] < 1.0, ran


def test_a_retry_runs_when_it_is_due(hg: Headgate) -> None:
    ran: list[float] = []

    @hg.handler("flaky", retry=Retry(intervals_s=(0.3,), jitter=False))
    def flaky(job: JobContext) -> None:
        ran.append(time.monotonic())
        if job.attempt == 1:
            raise RuntimeError("once")

    hg.start(POLL, scheduler=False)
    job = hg.enqueue("flaky")
    _wait_for(hg, job.id, "completed")
    assert 0.3 <= ran[1] - ran[0] < 1.2, ran


def test_a_rate_limited_backlog_drains_at_its_rate(hg: Headgate) -> None:
    """40 jobs at 10 per 200 ms: about 0.6 s; claimed only at each poll, 8 s."""
    hg.rates.set("api", limit=10, per_ms=200)

    @hg.handler("call", rate_class="api")
    def call(job: JobContext) -> None:
        return None

    jobs = hg.enqueue_many([{"kind": "call", "payload": {"n": n}} for n in range(40)])
    began = time.monotonic()
    hg.start(POLL, scheduler=False)
    for job in jobs:
        _wait_for(hg, job.id, "completed")
    assert time.monotonic() - began < 3.0


def test_a_snooze_and_a_later_retry_made_together_each_run_when_due(hg: Headgate) -> None:
    """The worker keeps every instant it knows of, not only the earliest."""
    ran: dict[str, list[float]] = {"nap": [], "flaky": []}

    @hg.handler("nap")
    def nap(job: JobContext) -> None:
        ran["nap"].append(time.monotonic())
        if job.snoozes == 0:
            raise Snooze(0.1)

    @hg.handler("flaky", retry=Retry(intervals_s=(0.4,), jitter=False))
    def flaky(job: JobContext) -> None:
        ran["flaky"].append(time.monotonic())
        if job.attempt == 1:
            raise RuntimeError("once")

    napping, failing = hg.enqueue("nap"), hg.enqueue("flaky")
    hg.start(POLL, scheduler=False)
    _wait_for(hg, napping.id, "completed")
    _wait_for(hg, failing.id, "completed")
    assert 0.1 <= ran["nap"][1] - ran["nap"][0] < 1.0, ran
    assert 0.4 <= ran["flaky"][1] - ran["flaky"][0] < 1.3, ran
