"""A worker process killed (SIGKILL) at each step of running a job, or frozen
(SIGSTOP) past its heartbeat, on the real clock.

The kill points: after the claim committed, mid-handler, and with the
completion written but not committed. Each time, the workers of this test's
process (on the same machine, they see the worker's process gone) make the job
claimable again with its crash counted, another worker completes it, and the
job's stream holds exactly one completion. A job that keeps crashing its
workers is quarantined with its fingerprint; its schedule's ticks then
record skipped/quarantined until an operator releases it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from headgate import Headgate, JobContext, RuntimeConfig, WorkerConfig

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
TTL_MS = 1_000
RESCUE_MS = 200
QUICK = WorkerConfig(heartbeat_ttl_ms=TTL_MS, rescue_interval_ms=RESCUE_MS, poll_interval_ms=50)
WORKER = textwrap.dedent(
    f"""
    import logging, sys, threading, time
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from headgate import Headgate, WorkerConfig
    from headgate._clock import StoreClock
    from headgate._domain.events import JobSucceeded
    from headgate._store.sql.store import SqlStore
    from tests.faults import Faults, FaultyStore, die

    url, kind, point = sys.argv[1], sys.argv[2], sys.argv[3]

    def has(units, event_type):
        return any(isinstance(e, event_type) for u in units for a in u for e in a.events)

    faults = Faults()
    if point == "after_claim":          # the claim committed; the handler never starts
        faults.after_claims_commit = lambda rows: die()
    elif point == "before_completion":  # the handler returned; its completion is not committed
        faults.after_append = lambda units, held: die() if has(units, JobSucceeded) else None
    hg = Headgate(FaultyStore(SqlStore(url, StoreClock()), faults))

    @hg.handler(kind)
    def handle(job):
        if point == "mid_handler":
            die()
        if point == "slow":
            time.sleep(2.0)
        return {{"by": "child"}}

    hg.start(
        WorkerConfig(queues={{"crashy": 1}}, heartbeat_ttl_ms={TTL_MS},
                     rescue_interval_ms={RESCUE_MS}, poll_interval_ms=50),
        scheduler=False,
    )
    print("ready", flush=True)
    threading.Event().wait(60)
    """
)


def _eventually(predicate: Callable[[], bool], timeout_s: float = 20.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _worker(url: str, kind: str, point: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, url, kind, point],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _completions(hg: Headgate, job_id: str) -> list[str]:
    """The worker of every completion in the job's stream."""
    return [
        e.event.worker_id  # type: ignore[attr-defined]
        for e in hg._core.store.log.read_stream(f"job-{job_id}")
        if e.type == "JobSucceeded"
    ]


@pytest.fixture
def rescuing(store_url: str) -> Iterator[Headgate]:
    """This process: the rescuer (its workers serve another queue) and a healthy
    handler for the rescued jobs, started by the test when it wants it."""
    hg = Headgate(store_url, config=RuntimeConfig(lease_ttl_ms=2_000))
    yield hg
    hg.close()


@pytest.mark.parametrize("point", ["after_claim", "mid_handler", "before_completion"])
def test_a_job_whose_worker_dies_is_rescued_and_completes_exactly_once(
    store_url: str, rescuing: Headgate, point: str
) -> None:
    hg = rescuing
    ran: list[int] = []

    @hg.handler("crashy", queue="crashy")
    def healthy(job: JobContext) -> dict[str, str]:
        ran.append(job.crash_count)
        return {"by": "rescuer"}

    job = hg.enqueue("crashy")
    child = _worker(store_url, "crashy", point)
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr.read() if child.stderr else ""
    died_at = time.monotonic()
    crashed = hg.jobs.get(job.id)
    assert crashed.state == "running" and crashed.attempts == 0
    running = crashed.running_attempt
    assert running is not None and running.attempt == 1
    hg.start(QUICK, scheduler=False)
    _eventually(
        lambda: hg.jobs.get(job.id).state == "completed", what="the rescued job to complete"
    )
    rescued_in = time.monotonic() - died_at
    done = hg.jobs.get(job.id)
    assert (done.crash_count, done.attempts, done.result) == (1, 1, {"by": "rescuer"})
    assert ran == [1], "the handler is told the job crashed once before"
    assert _completions(hg, job.id) == [hg._core.pool.identity.holder]  # type: ignore[union-attr]
    assert [a.outcome for a in done.attempt_history] == ["succeeded", "crashed"]
    crash = done.attempt_history[1]
    assert (crash.attempt, crash.worker_id, crash.started_at_ms) == (
        1,  # the attempt it ended, which a crash does not count: the next is 1 again
        running.worker_id,
        running.started_at_ms,
    )
    assert done.running_attempt is None
    assert rescued_in < (TTL_MS + 2 * RESCUE_MS) / 1000 + 3.0


def test_a_poison_job_is_quarantined_after_three_crashes_and_release_lets_its_ticks_run(
    store_url: str, rescuing: Headgate
) -> None:
    hg = rescuing

    @hg.handler("noop", queue="elsewhere")
    def noop(job: JobContext) -> None:  # this process only rescues here
        pass

    hg.schedules.put("poisoned", spec="@every:1000", kind="crashy", queue="crashy")
    hg.start(QUICK)
    fingerprint = hg.quarantine.fingerprint("crashy")
    for crash in (1, 2, 3):
        assert hg.jobs.list(kind="crashy", state="quarantined").jobs == [], (
            f"nothing is quarantined after {crash - 1} crashes"
        )
        _eventually(lambda: hg.jobs.list(kind="crashy", state="pending").jobs != [], what="a job")
        child = _worker(store_url, "crashy", "mid_handler")
        child.wait(timeout=60)
        assert child.returncode == -signal.SIGKILL
        _eventually(
            lambda: not hg.jobs.list(kind="crashy", state="running").jobs,
            what="the rescue of the crashed job",
        )
    quarantined = hg.jobs.list(kind="crashy", state="quarantined").jobs
    assert any(job.crash_count >= 1 for job in quarantined)
    assert hg.jobs.list(kind="crashy", state="pending").jobs == [], (
        "the ticks' jobs that were waiting are held with their fingerprint"
    )
    _eventually(
        lambda: any(e.outcome == "skipped" for e in hg.schedules.enqueue_events("poisoned").events),
        what="a tick skipped for the quarantine",
    )
    skipped = next(
        e for e in hg.schedules.enqueue_events("poisoned").events if e.outcome == "skipped"
    )
    assert skipped.reason == "quarantined"
    hg.quarantine.release(fingerprint)
    released_at = hg.clock.now_ms()
    _eventually(
        lambda: any(
            e.outcome == "enqueued" and e.recorded_at_ms > released_at
            for e in hg.schedules.enqueue_events("poisoned").events
        ),
        what="a tick after the release",
    )


def test_a_worker_frozen_past_its_heartbeat_cannot_record_what_was_done_elsewhere(
    store_url: str, rescuing: Headgate
) -> None:
    if store_url.startswith("sqlite"):
        pytest.skip("a SQLite writer frozen inside a write would hold the file's lock")
    hg = rescuing
    child = _worker(store_url, "crashy", "slow")
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    job = hg.enqueue("crashy", queue="crashy")
    try:
        _eventually(lambda: hg.jobs.get(job.id).state == "running", what="the child's claim")
        frozen_worker = hg.jobs.get(job.id).worker_id
        os.kill(child.pid, signal.SIGSTOP)

        @hg.handler("crashy", queue="crashy")
        def healthy(job: JobContext) -> dict[str, str]:
            return {"by": "rescuer"}

        hg.start(QUICK, scheduler=False)
        _eventually(lambda: hg.jobs.get(job.id).state == "completed", what="completion elsewhere")
        os.kill(child.pid, signal.SIGCONT)
        time.sleep(3.0)  # the child's handler returns and tries to record its end
        assert _completions(hg, job.id) == [hg._core.pool.identity.holder]  # type: ignore[union-attr]
        assert frozen_worker != hg._core.pool.identity.holder  # type: ignore[union-attr]
        assert hg.jobs.get(job.id).result == {"by": "rescuer"}
    finally:
        child.kill()
        child.wait(timeout=30)
    assert child.stderr is not None
    said = child.stderr.read()
    # It noticed the job had moved on and dropped its end, or it tried and was refused.
    assert "nothing is recorded of it" in said or "the job is no longer this worker's" in said, (
        said[-2000:]
    )
