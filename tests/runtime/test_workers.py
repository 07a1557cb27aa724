"""Workers run the jobs: results, retries, timeouts, cancel and retry, drain,
graceful stop, uniqueness while running, and schedules declared with their
handler. Time that matters (backoff, deadlines) is a fake clock."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from headgate import (
    DuplicateJob,
    Headgate,
    JobContext,
    JobStateConflict,
    RuntimeConfig,
    ValidationError,
    WorkerConfig,
)
from headgate._domain.events import FingerprintCrashBlamed
from headgate._domain.job_rules import retry_delay_ms
from headgate._domain.streams import quarantine_stream
from headgate._store.port import ANY_VERSION
from headgate.testing import FakeClock
from tests.conftest import AND_MEMORY

pytestmark = AND_MEMORY
FAST = WorkerConfig(poll_interval_ms=20, heartbeat_ttl_ms=400, rescue_interval_ms=100)


def _eventually(predicate: Callable[[], bool], timeout_s: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what or predicate}"
        time.sleep(0.01)


@pytest.fixture
def hg(make_headgate: Callable[..., Headgate]) -> Iterator[Headgate]:
    headgate = make_headgate(RuntimeConfig(lease_ttl_ms=60_000))
    yield headgate


def _state(hg: Headgate, job_id: str) -> str:
    return hg.jobs.get(job_id).state


def _metric(hg: Headgate, name: str, **labels: str) -> float | None:
    """One sample of hg's metrics, as a scrape would parse it."""
    text = generate_latest(hg.metrics.registry).decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_handler_runs_each_job_once_and_its_result_is_stored(hg: Headgate, flavour: str) -> None:
    seen: list[tuple[str, int, object]] = []
    if flavour == "sync":

        @hg.handler("greet")
        def greet(job: JobContext) -> dict[str, str]:
            seen.append((job.id, job.attempt, job.payload))
            return {"hello": job.payload["name"]}

    else:

        @hg.handler("greet")
        async def greet_async(job: JobContext) -> dict[str, str]:
            await asyncio.sleep(0)
            seen.append((job.id, job.attempt, job.payload))
            return {"hello": job.payload["name"]}

    hg.start(FAST)
    jobs = [hg.enqueue("greet", {"name": f"n{n}"}) for n in range(5)]
    _eventually(lambda: all(_state(hg, j.id) == "completed" for j in jobs))
    assert sorted(seen) == sorted((j.id, 1, {"name": f"n{n}"}) for n, j in enumerate(jobs))
    job = hg.jobs.get(jobs[0].id)
    assert (job.result, job.attempts, job.worker_id) == ({"hello": "n0"}, 1, None)
    assert [a.outcome for a in job.attempt_history] == ["succeeded"]


def test_a_backlog_is_worked_through_without_waiting_for_polls(hg: Headgate) -> None:
    """Each write that records ends claims into the slots they freed: a worker
    with a backlog never idles until its next poll."""

    @hg.handler("quick")
    def quick(job: JobContext) -> None:
        return None

    jobs = [hg.enqueue("quick") for _ in range(40)]
    hg.start(
        WorkerConfig(queues={"default": 2}, poll_interval_ms=60_000, listen=False),
        scheduler=False,
    )
    _eventually(
        lambda: all(_state(hg, job.id) == "completed" for job in jobs),
        timeout_s=10,
        what="the backlog to be worked through",
    )


def test_a_failing_handler_is_retried_with_backoff_until_it_has_failed(
    hg: Headgate, clock: FakeClock
) -> None:
    attempts: list[int] = []

    @hg.handler("flaky", max_attempts=3)
    def flaky(job: JobContext) -> None:
        attempts.append(job.attempt)
        raise ConnectionError(f"upstream down (attempt {job.attempt})")

    hg.start(FAST)
    job = hg.enqueue("flaky")
    for attempt in (1, 2):
        _eventually(lambda a=attempt: hg.jobs.get(job.id).attempts == a)
        pending = hg.jobs.get(job.id)
        assert pending.state == "pending"
        assert pending.run_at_ms == clock.now_ms() + retry_delay_ms(job.id, attempt)
        time.sleep(0.1)
        assert attempts == list(range(1, attempt + 1)), "nothing runs before its backoff"
        clock.set(pending.run_at_ms)
    _eventually(lambda: _state(hg, job.id) == "failed")
    failed = hg.jobs.get(job.id)
    assert (failed.attempts, failed.error_type) == (3, "ConnectionError")
    assert failed.error_message == "upstream down (attempt 3)"
    assert [(a.attempt, a.outcome) for a in failed.attempt_history] == [
        (3, "failed"),
        (2, "failed"),
        (1, "failed"),
    ]
    assert attempts == [1, 2, 3]


def test_an_attempt_past_its_deadline_fails_as_timed_out_and_its_late_result_is_dropped(
    hg: Headgate, clock: FakeClock
) -> None:
    release = threading.Event()
    told: list[bool] = []
    running: list[JobContext] = []

    @hg.handler("slow", timeout_s=1, max_attempts=5)
    def slow(job: JobContext) -> str:
        running.append(job)
        release.wait(10)
        told.append(job.cancelled.is_set())
        return "too late"

    hg.start(FAST)
    job = hg.enqueue("slow")
    _eventually(lambda: _state(hg, job.id) == "running" and bool(running))
    clock.advance(1_001)
    _eventually(lambda: bool(running[0].cancelled), what="the deadline passed")

    # Its thread runs on: the job stays running, overdue, and is not retried beside it
    # (the fake clock moves on so that the heartbeat, which says so, is renewed).
    def overdue_in_the_heartbeat() -> bool:
        clock.advance(50)
        return [worker.overdue for worker in hg.runtime.workers()] == [1]

    _eventually(overdue_in_the_heartbeat)
    assert (_state(hg, job.id), hg.jobs.get(job.id).attempts) == ("running", 0)
    release.set()
    _eventually(lambda: hg.jobs.get(job.id).attempts == 1)
    timed_out = hg.jobs.get(job.id)
    assert (timed_out.state, timed_out.error_type) == ("pending", "TimeoutError")
    assert timed_out.error_message == "the handler ran past its timeout of 1 s"
    assert timed_out.attempt_history[0].outcome == "timed_out"
    slow_labels = {"queue": "default", "kind": "slow"}
    # counted once the end's write has committed, a moment after the store shows it
    _eventually(
        lambda: _metric(hg, "headgate_job_attempts_total", outcome="timed_out", **slow_labels) == 1
    )
    assert _metric(hg, "headgate_job_run_duration_seconds_sum", **slow_labels) == 1.001
    _eventually(lambda: bool(told))
    assert told == [True], "the handler was told to stop"
    time.sleep(0.1)
    assert hg.jobs.get(job.id).result is None and hg.jobs.get(job.id).state == "pending"


def test_an_async_handler_is_cancelled_at_its_deadline(hg: Headgate, clock: FakeClock) -> None:
    cancelled = threading.Event()

    @hg.handler("sleepy", timeout_s=1)
    async def sleepy(job: JobContext) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    hg.start(FAST)
    job = hg.enqueue("sleepy")
    _eventually(lambda: _state(hg, job.id) == "running")
    clock.advance(1_001)
    assert cancelled.wait(10)
    _eventually(lambda: hg.jobs.get(job.id).attempts == 1)
    assert hg.jobs.get(job.id).attempt_history[0].outcome == "timed_out"


def test_a_cancelled_pending_job_never_runs(hg: Headgate, clock: FakeClock) -> None:
    ran: list[str] = []

    @hg.handler("later")
    def later(job: JobContext) -> None:
        ran.append(job.id)

    hg.start(FAST)
    job = hg.enqueue("later", run_at_ms=clock.now_ms() + 60_000)
    assert hg.jobs.cancel(job.id).state == "cancelled"
    clock.advance(60_000)
    time.sleep(0.2)
    assert ran == [] and _state(hg, job.id) == "cancelled"
    with pytest.raises(JobStateConflict, match="it is cancelled"):
        hg.jobs.cancel(job.id)


def test_a_cancelled_running_job_is_told_to_stop_and_its_end_is_not_recorded(
    hg: Headgate,
) -> None:
    started, stopped = threading.Event(), threading.Event()

    @hg.handler("long")
    def long(job: JobContext) -> str:
        started.set()
        if job.cancelled.wait(10):
            stopped.set()
        return "finished anyway"

    hg.start(FAST)
    job = hg.enqueue("long")
    assert started.wait(10)
    hg.jobs.cancel(job.id)
    assert stopped.wait(10), "the worker told the handler"
    time.sleep(0.1)
    cancelled = hg.jobs.get(job.id)
    assert (cancelled.state, cancelled.result) == ("cancelled", None)


def test_a_failed_job_is_retried_by_an_operator_and_runs_again(hg: Headgate) -> None:
    fixed = threading.Event()

    @hg.handler("report", max_attempts=1)
    def report(job: JobContext) -> str:
        if not fixed.is_set():
            raise RuntimeError("broken")
        return "ok"

    hg.start(FAST)
    job = hg.enqueue("report")
    _eventually(lambda: _state(hg, job.id) == "failed")
    with pytest.raises(
        JobStateConflict,
        match=r"it is pending \(retry needs a cancelled, expired, failed or quarantined job\)",
    ):
        hg.jobs.retry(hg.enqueue("report", run_at_ms=hg.clock.now_ms() + 10**9).id)
    fixed.set()
    assert hg.jobs.retry(job.id).state == "pending"
    _eventually(lambda: _state(hg, job.id) == "completed")
    done = hg.jobs.get(job.id)
    assert done.attempts == 1 and [a.outcome for a in done.attempt_history] == [
        "succeeded",
        "retried",
        "failed",
    ]


def test_drain_runs_every_due_job_now_and_says_what_ran(hg: Headgate, clock: FakeClock) -> None:
    @hg.handler("ok")
    def ok(job: JobContext) -> int:
        return 1

    @hg.handler("bad", max_attempts=2)
    def bad(job: JobContext) -> None:
        raise ValueError("no")

    for _ in range(3):
        hg.enqueue("ok")
    hg.enqueue("bad")
    hg.enqueue("ok", run_at_ms=clock.now_ms() + 60_000)  # not due
    summary = hg.drain()
    assert (summary.ran, summary.succeeded, summary.failed, summary.retrying) == (4, 3, 0, 1)
    clock.advance(60_000)
    assert hg.drain().ran == 2  # the later one, and bad's retry
    assert hg.drain().ran == 0
    assert hg.runtime.workers() == [], "drain leaves no heartbeat behind"


def test_a_completed_job_clears_the_crash_blame_its_fingerprint_carried(hg: Headgate) -> None:
    """Workers killed for reasons of their own (a deploy, a host's out-of-memory
    killer) blame the jobs they ran; a completion shows the payload is not the
    culprit, so unrelated deaths never add up to quarantining a healthy job."""

    @hg.handler("report")
    def report(job: JobContext) -> None:
        return None

    healthy, other = (
        hg.quarantine.fingerprint("report", {"day": 1}),
        hg.quarantine.fingerprint("report", {"day": 2}),
    )
    for fingerprint in (healthy, other):
        hg._core.store.log.append(
            quarantine_stream(fingerprint),
            ANY_VERSION,
            [FingerprintCrashBlamed(fingerprint, "earlier-job", 2_000)],
        )
    hg.enqueue("report", {"day": 1})
    assert hg.drain().succeeded == 1
    with hg._core.store.log.write() as transaction:
        assert transaction.crash_blame([healthy, other]) == {healthy: 0, other: 2_000}
    hg.enqueue("report", {"day": 1})
    assert hg.drain().succeeded == 1
    cleared = [
        e
        for e in hg._core.store.log.read_stream(quarantine_stream(healthy))
        if e.type != "FingerprintCrashBlamed"
    ]
    assert [e.type for e in cleared] == ["FingerprintBlameCleared"], "cleared once, not per job"


def test_a_kind_with_no_handler_waits_and_is_named_at_start(hg: Headgate) -> None:
    hg.enqueue("orphan.kind")

    @hg.handler("known")
    def known(job: JobContext) -> None:
        pass

    with capture_logs() as logs:
        hg.start(FAST)
        time.sleep(0.1)
    warnings = [entry for entry in logs if entry.get("kinds") == ["orphan.kind"]]
    assert warnings and warnings[0]["log_level"] == "warning"
    assert hg.jobs.list(kind="orphan.kind").jobs[0].state == "pending"


@pytest.mark.parametrize(
    ("returned", "rule"),
    [({1, 2}, "not plain JSON"), ("x" * 70_000, "the limit is 65536")],
)
def test_a_result_that_cannot_be_stored_fails_the_attempt_clearly(
    hg: Headgate, returned: object, rule: str
) -> None:
    @hg.handler("odd", max_attempts=1)
    def odd(job: JobContext) -> object:
        return returned

    summary = hg.drain()
    assert summary.ran == 0
    job = hg.enqueue("odd")
    assert hg.drain().failed == 1
    failed = hg.jobs.get(job.id)
    assert failed.error_type == "headgate.InvalidResult"
    assert failed.error_message is not None and rule in failed.error_message


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"run_at_ms": -1}, "run_at_ms"),
        ({"run_at_ms": "soon"}, "run_at_ms"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": float("nan")}, "timeout_s"),
        ({"payload": {1: "x"}}, "payload"),
    ],
)
def test_bad_job_options_are_refused_naming_the_field(
    hg: Headgate, options: dict[str, object], field: str
) -> None:
    options = dict(options)
    payload = options.pop("payload", None)
    with pytest.raises(ValidationError, match=f"^{field}: "):
        hg.enqueue("k", payload, **options)  # type: ignore[arg-type]
    assert hg.jobs.list().jobs == []


def test_bad_handler_registrations_are_refused(hg: Headgate) -> None:
    with pytest.raises(ValidationError, match=r"^timeout_s: "):
        hg.handler("k", timeout_s=-1)(lambda job: None)
    with pytest.raises(ValidationError, match=r"^max_attempts: "):
        hg.handler("k", max_attempts=0)(lambda job: None)
    hg.handler("k")(lambda job: None)
    with pytest.raises(ValidationError, match="already registered"):
        hg.handler("k")(lambda job: None)


def test_stop_lets_quick_handlers_finish_and_releases_the_rest(
    make_headgate: Callable[..., Headgate],
) -> None:
    hg = make_headgate()
    quick_started, stuck_started = threading.Event(), threading.Event()

    @hg.handler("quick")
    def quick(job: JobContext) -> str:
        quick_started.set()
        time.sleep(0.2)
        return "done"

    @hg.handler("stuck")
    def stuck(job: JobContext) -> None:
        stuck_started.set()
        job.cancelled.wait(30)

    hg.start(WorkerConfig(poll_interval_ms=20, shutdown_timeout_s=1.0))
    quick_job, stuck_job = hg.enqueue("quick"), hg.enqueue("stuck")
    assert quick_started.wait(10) and stuck_started.wait(10)
    began = time.monotonic()
    hg.stop()
    assert time.monotonic() - began < 1.0 + 1.5
    assert _state(hg, quick_job.id) == "completed"
    released = hg.jobs.get(stuck_job.id)
    assert (released.state, released.attempts, released.crash_count) == ("pending", 0, 0)
    assert released.attempt_history[0].outcome == "released"
    assert hg.runtime.workers() == []
    stuck_labels = {"queue": "default", "kind": "stuck"}
    assert _metric(hg, "headgate_job_attempts_total", outcome="released", **stuck_labels) == 1
    assert _metric(hg, "headgate_job_run_duration_seconds_count", **stuck_labels) is None
    quick_labels = {"queue": "default", "kind": "quick", "outcome": "succeeded"}
    assert _metric(hg, "headgate_job_attempts_total", **quick_labels) == 1


def test_a_unique_key_stays_held_while_its_job_runs(hg: Headgate) -> None:
    started, finish = threading.Event(), threading.Event()

    @hg.handler("once")
    def once(job: JobContext) -> None:
        started.set()
        finish.wait(10)

    hg.start(FAST)
    job = hg.enqueue("once", unique_key="nightly-2024-01-01")
    assert started.wait(10)
    with pytest.raises(DuplicateJob) as held:
        hg.enqueue("once", unique_key="nightly-2024-01-01")
    assert held.value.job_id == job.id
    finish.set()
    _eventually(lambda: _state(hg, job.id) == "completed")
    assert hg.enqueue("once", unique_key="nightly-2024-01-01").id != job.id


def test_backpressure_counts_running_jobs_too(make_headgate: Callable[..., Headgate]) -> None:
    from headgate import AdmissionLimits, AdmissionRejected

    hg = make_headgate(
        RuntimeConfig(lease_ttl_ms=60_000, limits=AdmissionLimits(queue_limits={"default": 1}))
    )
    started, finish = threading.Event(), threading.Event()

    @hg.handler("busy")
    def busy(job: JobContext) -> None:
        started.set()
        finish.wait(10)

    hg.start(FAST)
    hg.enqueue("busy")
    assert started.wait(10)
    with pytest.raises(AdmissionRejected, match="limit"):
        hg.enqueue("busy")
    finish.set()


def test_a_schedule_declared_with_its_handler_runs_on_its_ticks(
    hg: Headgate, clock: FakeClock
) -> None:
    ran: list[tuple[object, int]] = []

    @hg.periodic("pulse", spec="@every:60000", payload={"n": 1}, max_attempts=4, timeout_s=5)
    def pulse(job: JobContext) -> None:
        ran.append((job.periodic_origin, job.max_attempts))

    hg.start(FAST)
    schedule = hg.schedules.get("pulse")
    assert (schedule.kind, schedule.max_attempts, schedule.timeout_ms) == ("pulse", 4, 5_000)
    clock.set(schedule.next_run_ms)
    assert hg.fire_due_ticks()
    _eventually(lambda: hg.jobs.list(schedule_id="pulse", state="completed").jobs != [])
    assert ran == [(("pulse", schedule.next_run_ms), 4)]
    job = hg.jobs.list(schedule_id="pulse").jobs[0]
    assert (job.state, job.max_attempts, job.timeout_ms) == ("completed", 4, 5_000)


def test_a_running_tick_job_keeps_its_ticks_identity_and_counts_against_its_queue(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    """While a tick's job runs it still holds the tick's unique key and its (schedule,
    tick) identity, and the queue's limit counts it: the next tick is refused by
    backpressure until it finishes."""
    from headgate import AdmissionLimits, TickHasJob
    from headgate._domain.ids import tick_job_id, tick_unique_key

    hg = make_headgate(
        RuntimeConfig(lease_ttl_ms=60_000, limits=AdmissionLimits(queue_limits={"default": 1}))
    )
    started, finish = threading.Event(), threading.Event()

    @hg.periodic("pulse", spec="@every:60000")
    def pulse(job: JobContext) -> None:
        started.set()
        finish.wait(10)

    hg.start(FAST)
    tick = hg.schedules.get("pulse").next_run_ms
    clock.set(tick)
    assert hg.fire_due_ticks()
    assert started.wait(10)
    job_id = tick_job_id("pulse", tick)
    assert _state(hg, job_id) == "running"
    with pytest.raises(DuplicateJob) as key_held:
        hg.enqueue("pulse", unique_key=tick_unique_key("pulse", tick))
    assert key_held.value.job_id == job_id
    with pytest.raises(TickHasJob) as tick_held:
        hg.enqueue("pulse", periodic_origin=("pulse", tick))
    assert tick_held.value.job_id == job_id
    clock.set(tick + 60_000)
    assert hg.fire_due_ticks()
    latest = hg.schedules.enqueue_events("pulse").events[0]
    assert (latest.tick_ms, latest.outcome, latest.reason) == (
        tick + 60_000,
        "failed",
        "backpressure",
    )
    finish.set()
    _eventually(lambda: _state(hg, job_id) == "completed")
    assert [job.id for job in hg.jobs.list(schedule_id="pulse").jobs] == [job_id]
