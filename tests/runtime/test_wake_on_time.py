"""An idle worker sleeps on its clock until the next instant a job of its own
becomes claimable, and claims it then, not at its poll: a job scheduled for
later, one it snoozed or retried, a rate class's window freeing a start; a
concurrency limit freed by another worker's end wakes it by notification; and
an enqueue in its own process hands it the job with no notification at all.

On a fake clock whose poll (a minute) never comes: a job runs only if the
worker woke for it. Each waits a little real time first to show that nothing
ran early.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from headgate import Headgate, JobContext, Retry, Snooze, WorkerConfig
from headgate.testing import FakeClock
from tests.conftest import AND_MEMORY

LONG_POLL = WorkerConfig(queues={"default": 2}, poll_interval_ms=60_000)
DUE_IN_MS = 5_000
SETTLE_S = 0.3
"""Real time given to a worker that would run a job early, were it wrong."""
WOKEN_WITHIN_S = 1.5
"""A wake-up's bound in real time: under the 2.5 s a heartbeat would take to
wake a worker that waited in real time instead of on its clock."""


def _eventually(done: Callable[[], bool], what: str, within_s: float = 10.0) -> None:
    ends = time.monotonic() + within_s
    while not done():
        assert time.monotonic() < ends, f"{what} within {within_s} s"
        time.sleep(0.005)


def _runs_at_its_instant(clock: FakeClock, ran_at: list[int], due_ms: int, runs: int) -> None:
    """Nothing more runs a millisecond before `due_ms`; at it, the next run starts."""
    clock.set(due_ms - 1)
    time.sleep(SETTLE_S)
    assert len(ran_at) == runs - 1, "ran before it was due"
    clock.set(due_ms)
    _eventually(
        lambda: len(ran_at) == runs, "the worker claimed it at its due instant", WOKEN_WITHIN_S
    )
    assert ran_at[-1] == due_ms


@AND_MEMORY
def test_a_job_scheduled_for_later_is_claimed_at_its_run_at(hg: Headgate, clock: FakeClock) -> None:
    ran_at: list[int] = []

    @hg.handler("later")
    def later(job: JobContext) -> None:
        ran_at.append(clock.now_ms())

    hg.start(LONG_POLL, scheduler=False)
    due = clock.now_ms() + DUE_IN_MS
    hg.enqueue("later", run_at_ms=due)
    _runs_at_its_instant(clock, ran_at, due, runs=1)


@AND_MEMORY
def test_a_snoozed_job_is_claimed_when_its_snooze_ends(hg: Headgate, clock: FakeClock) -> None:
    ran_at: list[int] = []

    @hg.handler("nap")
    def nap(job: JobContext) -> None:
        ran_at.append(clock.now_ms())
        if job.snoozes == 0:
            raise Snooze(DUE_IN_MS / 1000)

    hg.start(LONG_POLL, scheduler=False)
    job = hg.enqueue("nap")
    _eventually(lambda: hg.jobs.get(job.id).snoozes == 1, "the snooze recorded")
    _runs_at_its_instant(clock, ran_at, ran_at[0] + DUE_IN_MS, runs=2)


@AND_MEMORY
def test_a_retry_is_claimed_when_its_backoff_ends(hg: Headgate, clock: FakeClock) -> None:
    ran_at: list[int] = []

    @hg.handler("flaky", retry=Retry(intervals_s=(DUE_IN_MS / 1000,), jitter=False))
    def flaky(job: JobContext) -> None:
        ran_at.append(clock.now_ms())
        if job.attempt == 1:
            raise RuntimeError("once")

    hg.start(LONG_POLL, scheduler=False)
    job = hg.enqueue("flaky")
    _eventually(lambda: hg.jobs.get(job.id).attempts == 1, "the failed attempt recorded")
    _runs_at_its_instant(clock, ran_at, ran_at[0] + DUE_IN_MS, runs=2)


@AND_MEMORY
def test_a_rate_class_freeing_a_start_wakes_the_worker(hg: Headgate, clock: FakeClock) -> None:
    ran_at: list[int] = []
    hg.rates.set("api", limit=1, per_ms=DUE_IN_MS)

    @hg.handler("call", rate_class="api")
    def call(job: JobContext) -> None:
        ran_at.append(clock.now_ms())

    started = clock.now_ms()
    hg.enqueue_many([{"kind": "call", "payload": n} for n in range(2)])
    hg.start(LONG_POLL, scheduler=False)
    _eventually(lambda: len(ran_at) == 1, "the first call")
    _runs_at_its_instant(clock, ran_at, started + DUE_IN_MS, runs=2)


def test_a_limit_freed_by_another_workers_end_wakes_a_worker_waiting_for_it(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    """Two workers of one store (two processes, as far as the store knows) share a
    limit of one running `export`: the waiting one hears the other's end."""
    release = threading.Event()
    ran: dict[str, list[str]] = {"first": [], "second": []}
    workers = {}
    for name, queue in (("first", "a"), ("second", "b")):
        hg = make_headgate()
        workers[name] = hg

        @hg.handler("export", queue=queue)
        def export(job: JobContext, name: str = name) -> None:
            ran[name].append(job.id)
            if name == "first":
                release.wait(10)

    first, second = workers["first"], workers["second"]
    first.limits.set(kind="export", limit=1)
    first.start(WorkerConfig(queues={"a": 1}, poll_interval_ms=60_000), scheduler=False)
    first.enqueue("export")
    _eventually(lambda: len(ran["first"]) == 1, "the first export running")
    second.start(WorkerConfig(queues={"b": 1}, poll_interval_ms=60_000), scheduler=False)
    waiting = first.enqueue("export", queue="b")
    time.sleep(SETTLE_S)
    assert ran["second"] == [], "the limit held"
    assert second.jobs.get(waiting.id).state == "pending"
    release.set()
    _eventually(
        lambda: ran["second"] == [waiting.id], "the waiting worker woken by the end", WOKEN_WITHIN_S
    )


@AND_MEMORY
def test_an_enqueue_in_the_workers_process_wakes_it_without_a_notification(
    hg: Headgate, clock: FakeClock
) -> None:
    """No listener: only the enqueue's own hand-over can wake the worker."""
    ran: list[str] = []

    @hg.handler("now")
    def now(job: JobContext) -> None:
        ran.append(job.id)

    hg.start(
        WorkerConfig(queues={"default": 2}, poll_interval_ms=60_000, listen=False),
        scheduler=False,
    )
    for _ in range(3):
        time.sleep(0.05)  # idle again
        job = hg.enqueue("now")
        _eventually(lambda job_id=job.id: job_id in ran, "the job handed over", within_s=5)
