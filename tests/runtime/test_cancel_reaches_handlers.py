"""A running job's cancel reaches its handler at once: in its own process when
the cancel is made there (a newer tick under `overlap="cancel_previous"`, an
operator's cancel_job), and in another process as soon as its worker hears of
the commit, never at its next heartbeat. Otherwise `cancel_previous` runs as
many handlers at once as `allow` does. On the real clock, with real processes,
on each backend; the heartbeat is set long (every 5 s), so a test that waited
for it would fail.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import pairwise

import pytest

from headgate import Headgate, JobContext, RuntimeConfig, WorkerConfig

pytestmark = pytest.mark.processes

TOLD_WITHIN_S = 0.5
"""The most a handler may take to be told (seen: 5-60 ms); the heartbeat that
told it before came every 5 s here."""
SLOW_HEARTBEAT = WorkerConfig(
    heartbeat_ttl_ms=20_000, poll_interval_ms=5_000, shutdown_timeout_s=0.5
)
"""Stopped, the worker gives the handler still waiting back at once (it is told)."""


@dataclass
class Runs:
    """What the handlers saw: how many ran at once, and when each was told to stop."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    running: int = 0
    most_at_once: int = 0
    told_at_s: dict[str, float] = field(default_factory=dict)

    def handler(self, job: JobContext) -> None:
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            if job.cancelled.wait(20):
                self.told_at_s[job.id] = time.time()
        finally:
            with self.lock:
                self.running -= 1


@pytest.fixture
def runs() -> Runs:
    return Runs()


@pytest.fixture
def worker(store_url: str, runs: Runs) -> Iterator[Headgate]:
    hg = Headgate(store_url, config=RuntimeConfig(lease_ttl_ms=2_000))
    hg.handler("long", timeout_s=30)(runs.handler)
    yield hg
    hg.close()


def told_late_s(hg: Headgate, runs: Runs, schedule_id: str) -> list[float]:
    """For each tick job the next tick cancelled while it ran: how long after the
    next tick's job was made its handler was told."""
    jobs = sorted(hg.jobs.list(schedule_id=schedule_id).jobs, key=lambda job: job.created_at_ms)
    late = []
    for job, successor in pairwise(jobs):
        if job.state == "cancelled" and job.id in runs.told_at_s:
            late.append(runs.told_at_s[job.id] - successor.created_at_ms / 1000)
    return late


def _assert_each_previous_run_was_told_at_once(worker: Headgate, runs: Runs) -> None:
    late = told_late_s(worker, runs, "each-second")
    assert len(late) >= 2, late
    assert max(late) < TOLD_WITHIN_S, f"handlers told this late (s): {late}"
    assert runs.most_at_once <= 2, "cancel_previous ran handlers side by side"


def test_cancel_previous_tells_the_running_handler_at_once_in_its_process(
    worker: Headgate, runs: Runs
) -> None:
    worker.schedules.put("each-second", spec="@every:1000", kind="long", overlap="cancel_previous")
    worker.start(SLOW_HEARTBEAT)
    time.sleep(4.5)
    _assert_each_previous_run_was_told_at_once(worker, runs)


def test_cancel_previous_tells_the_running_handler_at_once_in_another_process(
    store_url: str, worker: Headgate, runs: Runs
) -> None:
    scheduler = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import time
                from headgate import Headgate, RuntimeConfig
                hg = Headgate({store_url!r}, config=RuntimeConfig(lease_ttl_ms=2_000))
                hg.schedules.put(
                    "each-second", spec="@every:1000", kind="long", overlap="cancel_previous"
                )
                hg.start(workers=False)
                time.sleep(60)
                """
            ),
        ],
        stderr=subprocess.DEVNULL,
    )
    try:
        worker.start(SLOW_HEARTBEAT, scheduler=False)
        time.sleep(5.5)
    finally:
        scheduler.kill()
        scheduler.wait()
    _assert_each_previous_run_was_told_at_once(worker, runs)


def test_an_operators_cancel_in_another_process_reaches_the_handler_at_once(
    store_url: str, worker: Headgate, runs: Runs
) -> None:
    worker.start(SLOW_HEARTBEAT, scheduler=False)
    job = worker.enqueue("long")
    ends = time.monotonic() + 10
    while runs.running == 0:
        assert time.monotonic() < ends, "the job did not start"
        time.sleep(0.01)
    cancelled = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import time; from headgate import Headgate\n"
            f"with Headgate({store_url!r}) as hg:\n"
            f"    hg.jobs.cancel({job.id!r})\n"
            f"    print(time.time())",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    cancelled_at = float(cancelled.stdout.strip())
    ends = time.monotonic() + 10
    while job.id not in runs.told_at_s:
        assert time.monotonic() < ends, "the handler was never told"
        time.sleep(0.01)
    assert runs.told_at_s[job.id] - cancelled_at < TOLD_WITHIN_S


def test_an_idle_worker_sleeps_through_commits_that_could_take_no_job_of_its(
    store_url: str, worker: Headgate
) -> None:
    """A commit may have cancelled a running job (SQLite cannot say what it was):
    with none running, the worker has nothing to look at and waits as before,
    rather than waking every millisecond for a look it never takes."""
    worker.start(SLOW_HEARTBEAT, scheduler=False)
    pool = worker._core.pool
    assert pool is not None
    turns = 0
    take_turn = pool._turn

    def counted(*, final: bool) -> None:
        nonlocal turns
        turns += 1
        take_turn(final=final)

    pool._turn = counted  # type: ignore[method-assign]
    with Headgate(store_url) as other:
        other.schedules.put("elsewhere", spec="@every:60000", kind="other")
        time.sleep(1.0)
    assert turns < 20, f"{turns} turns in a second with nothing to do"
