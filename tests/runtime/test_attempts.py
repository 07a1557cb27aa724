"""An attempt ends the same way whoever runs it: the worker pool or `drain()`.

Each test runs one handler both ways on one store, and compares what a user
reads of the two jobs afterwards. Deadlines are kept on the fake clock, which
a handler moves past its own deadline to run late.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from headgate import Headgate, Job, JobContext, WorkerConfig
from headgate.testing import FakeClock

FAST = WorkerConfig(poll_interval_ms=20, heartbeat_ttl_ms=400, rescue_interval_ms=100)
TIMEOUT_MESSAGE = "the handler ran past its timeout of 1 s"


def _recorded(job: Job) -> tuple[object, ...]:
    """What a user reads of a job with one ended attempt, leaving out what names
    the job or the worker that ran it."""
    [attempt] = job.attempt_history
    return (
        job.state,
        job.attempts,
        job.result,
        job.error_type,
        job.error_message,
        attempt.attempt,
        attempt.outcome,
        attempt.error_type,
        attempt.error_message,
        None if attempt.started_at_ms is None else attempt.ended_at_ms - attempt.started_at_ms,
    )


def _by_the_pool(hg: Headgate, kind: str) -> tuple[object, ...]:
    job = hg.enqueue(kind)
    hg.start(FAST, scheduler=False)
    try:
        deadline = time.monotonic() + 10
        while not hg.jobs.get(job.id).attempt_history:
            assert time.monotonic() < deadline, "the pool recorded no end of the attempt"
            time.sleep(0.01)
    finally:
        hg.stop()
    return _recorded(hg.jobs.get(job.id))


def _by_drain(hg: Headgate, kind: str) -> tuple[object, ...]:
    job = hg.enqueue(kind)
    assert hg.drain().ran == 1
    return _recorded(hg.jobs.get(job.id))


def test_an_async_handler_past_its_timeout_is_recorded_timed_out_by_drain_as_by_the_pool(
    hg: Headgate, clock: FakeClock
) -> None:
    cancelled: list[str] = []

    @hg.handler("sleepy", timeout_s=1, max_attempts=1)
    async def sleepy(job: JobContext) -> str:
        clock.advance(1_001)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(job.id)
            raise
        return "too late"

    by_pool = _by_the_pool(hg, "sleepy")
    by_drain = _by_drain(hg, "sleepy")
    assert by_drain == by_pool
    assert by_pool[:7] == ("failed", 1, None, "TimeoutError", TIMEOUT_MESSAGE, 1, "timed_out")
    assert len(cancelled) == 2, "each run was cancelled at its deadline"


def test_a_sync_handler_past_its_timeout_is_told_to_stop_and_recorded_timed_out_by_drain(
    hg: Headgate, clock: FakeClock
) -> None:
    told: list[bool] = []

    @hg.handler("slow", timeout_s=1, max_attempts=1)
    def slow(job: JobContext) -> str:
        clock.advance(1_001)
        told.append(job.cancelled.wait(5))
        return "too late"

    by_pool = _by_the_pool(hg, "slow")
    by_drain = _by_drain(hg, "slow")
    assert by_drain == by_pool
    assert by_pool[:7] == ("failed", 1, None, "TimeoutError", TIMEOUT_MESSAGE, 1, "timed_out")
    assert told == [True, True], "both were told at their deadline, and their results refused"


def test_job_cancelled_reads_as_a_bool_that_turns_true_when_the_job_is_told_to_stop(
    hg: Headgate, clock: FakeClock
) -> None:
    seen: list[tuple[bool, bool]] = []

    @hg.handler("slow", timeout_s=1, max_attempts=1)
    def slow(job: JobContext) -> None:
        told_before = told_after = False
        if job.cancelled:
            told_before = True
        clock.advance(1_001)
        job.cancelled.wait(5)
        if job.cancelled:
            told_after = True
        seen.append((told_before, told_after))

    _by_drain(hg, "slow")
    assert seen == [(False, True)]


def test_a_result_returned_after_the_deadline_is_refused_even_before_anyone_looked(
    hg: Headgate, clock: FakeClock
) -> None:
    """The deadline is the clock's, not the moment a watcher notices it."""

    @hg.handler("late", timeout_s=1, max_attempts=1)
    def late(job: JobContext) -> str:
        clock.advance(1_001)
        return "too late"

    by_pool = _by_the_pool(hg, "late")
    assert _by_drain(hg, "late") == by_pool
    assert by_pool[6] == "timed_out"


def _raises_value_error(job: JobContext) -> None:
    raise ValueError(f"no such account: {job.payload}")


async def _raises_value_error_async(job: JobContext) -> None:
    await asyncio.sleep(0)
    raise ValueError(f"no such account: {job.payload}")


async def _raises_cancelled_error(job: JobContext) -> None:
    """A library the handler awaits was cancelled under it: the attempt fails,
    it is not a timeout nor lost."""
    raise asyncio.CancelledError("the connection pool closed")


def _returns_json(job: JobContext) -> dict[str, object]:
    return {"rows": [1, 2], "ok": True}


async def _returns_json_async(job: JobContext) -> dict[str, object]:
    return {"rows": [1, 2], "ok": True}


def _returns_a_set(job: JobContext) -> object:
    return {1, 2}


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (_raises_value_error, ("failed", "ValueError", "no such account: None")),
        (_raises_value_error_async, ("failed", "ValueError", "no such account: None")),
        (
            _raises_cancelled_error,
            ("failed", "asyncio.exceptions.CancelledError", "the connection pool closed"),
        ),
        (_returns_json, ("completed", None, None)),
        (_returns_json_async, ("completed", None, None)),
        (_returns_a_set, ("failed", "headgate.InvalidResult", None)),
    ],
    ids=["error", "error-async", "own-cancelled-error-async", "result", "result-async", "set"],
)
def test_a_handler_s_error_or_result_is_recorded_alike_by_drain_and_by_the_pool(
    hg: Headgate, handler: Callable[[JobContext], object], expected: tuple[str, ...]
) -> None:
    hg.handler("work", max_attempts=1)(handler)
    by_pool = _by_the_pool(hg, "work")
    assert _by_drain(hg, "work") == by_pool
    state, error_type, message = expected
    assert (by_pool[0], by_pool[3]) == (state, error_type)
    if message is not None:
        assert by_pool[4] == message
    if state == "completed":
        assert by_pool[2] == {"rows": [1, 2], "ok": True}


def test_drain_stops_at_ctrl_c_and_records_nothing_for_the_attempt(hg: Headgate) -> None:
    """Ctrl-C in a script's drain stops the script; it is not the handler failing."""

    @hg.handler("interrupted")
    def interrupted(job: JobContext) -> None:
        raise KeyboardInterrupt

    job = hg.enqueue("interrupted")
    with pytest.raises(KeyboardInterrupt):
        hg.drain()
    assert hg.jobs.get(job.id).attempt_history == ()
    assert hg.runtime.workers() == [], "drain leaves no heartbeat behind"


def test_the_pool_records_a_handler_that_raises_keyboard_interrupt_as_failed(
    hg: Headgate,
) -> None:
    """On a worker thread nobody pressed Ctrl-C: the handler raised it, and its
    attempt fails like any other (the thread lives on)."""

    @hg.handler("odd", max_attempts=1)
    def odd(job: JobContext) -> None:
        raise KeyboardInterrupt

    assert _by_the_pool(hg, "odd")[:4] == ("failed", 1, None, "KeyboardInterrupt")
    ran = threading.Event()

    @hg.handler("next")
    def following(job: JobContext) -> None:
        ran.set()

    assert _by_the_pool(hg, "next")[0] == "completed" and ran.is_set()


def test_each_attempt_is_held_to_its_own_deadline_however_they_overlap(
    hg: Headgate, clock: FakeClock
) -> None:
    """A short timeout started beside a long one, and a long one after a short
    one has ended, each time out when the clock passes their own deadline."""
    release = threading.Event()

    @hg.handler("long", timeout_s=60)
    def long(job: JobContext) -> str:
        release.wait(10)
        return "done"

    @hg.handler("short", timeout_s=1, max_attempts=1)
    def short(job: JobContext) -> None:
        job.cancelled.wait(10)

    @hg.handler("quick", timeout_s=1)
    def quick(job: JobContext) -> None:
        return None

    @hg.handler("slower", timeout_s=5, max_attempts=1)
    def slower(job: JobContext) -> None:
        job.cancelled.wait(10)

    def wait_for(job_id: str, state: str) -> None:
        deadline = time.monotonic() + 10
        while hg.jobs.get(job_id).state != state:
            assert time.monotonic() < deadline, f"job {job_id} never became {state}"
            time.sleep(0.01)

    hg.start(FAST, scheduler=False)
    running_long = hg.enqueue("long")
    wait_for(running_long.id, "running")
    running_short = hg.enqueue("short")
    wait_for(running_short.id, "running")
    clock.advance(1_001)
    wait_for(running_short.id, "failed")
    assert hg.jobs.get(running_long.id).state == "running"
    release.set()
    wait_for(running_long.id, "completed")

    wait_for(hg.enqueue("quick").id, "completed")
    later = hg.enqueue("slower")
    wait_for(later.id, "running")
    clock.advance(5_001)
    wait_for(later.id, "failed")
    assert hg.jobs.get(later.id).error_message == "the handler ran past its timeout of 5 s"
