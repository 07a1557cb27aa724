"""A paused queue, as a running worker pool sees it: what runs finishes, nothing
new is claimed, and a resume wakes the workers at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from headgate import Headgate, JobContext, WorkerConfig
from tests.conftest import AND_MEMORY

pytestmark = AND_MEMORY
SLOW_POLLS = WorkerConfig(queues={"reports": 2}, poll_interval_ms=5_000)
"""Polls too far apart to find work in time: only a wake-up does."""
QUIET = 0.5
"""How long a paused queue is watched for a claim it must not make (seconds)."""


def _eventually(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_paused_queue_finishes_what_runs_claims_nothing_and_resumes_at_once(
    hg: Headgate,
) -> None:
    release = threading.Event()
    started: list[str] = []

    @hg.handler("report.build", queue="reports")
    def build(job: JobContext) -> None:
        started.append(job.id)
        release.wait(10)

    hg.start(SLOW_POLLS)
    try:
        running = hg.enqueue("report.build").id
        _eventually(lambda: started == [running])
        paused = hg.queues.pause("reports", "nightly backup")
        assert (paused.paused, paused.running) == (True, 1)
        waiting = hg.enqueue("report.build").id
        release.set()
        _eventually(lambda: hg.jobs.get(running).state == "completed")
        time.sleep(QUIET)
        assert started == [running]
        assert hg.jobs.get(waiting).state == "pending"

        resumed_at = time.monotonic()
        assert hg.queues.resume("reports").paused is False
        _eventually(lambda: hg.jobs.get(waiting).state == "completed")
        assert time.monotonic() - resumed_at < 2.5
    finally:
        release.set()
        hg.stop()
