"""Handlers registered with `executor="process"` run in child processes: a stuck
one is killed at its deadline (recorded timed_out, its slot free at once) and
retried; what it raises comes back as its own class, so a retry policy
matches it; a child that dies is a crash of its job, counted as a worker's
death is; a child is held to its memory limit and replaced after
`max_jobs_per_child`; and CPU-bound handlers in children leave the
scheduler's ticks on time. On the real clock, with real processes, on each
backend.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from headgate import (
    Headgate,
    JobContext,
    Retry,
    RuntimeConfig,
    Snooze,
    ValidationError,
    WorkerConfig,
)
from headgate._runtime.hooks import AttemptResult, EnqueueHook, TickContext
from tests.processes import process_running

pytestmark = pytest.mark.processes

LATE_MS = 500
"""The most the median tick may commit late beside four CPU-bound handlers:
generous for a two-core machine also running another test process (seen: 237
ms), and half of what the same handlers cost it as threads sharing its GIL
(median 1.0-1.9 s late, benchmarks/host_fit.py). The median, not every tick:
under a loaded CI box one tick can wait on the OS for a core, which says
nothing about the GIL."""
QUICK = WorkerConfig(poll_interval_ms=50, heartbeat_ttl_ms=2_000, rescue_interval_ms=200)


class NotWorthRetrying(Exception):
    """A handler's own error, refused by its retry policy."""


class NeedsTwoArguments(Exception):
    """An error whose __init__ pickling cannot call again (it takes two arguments)."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(f"{code}: {why}")
        self.code = code


def spin_first_time(job: JobContext) -> dict[str, int]:
    """Loops forever on its first attempt (ignoring job.cancelled), returns on the next."""
    if job.attempt == 1:
        while True:
            pass
    return {"pid": os.getpid(), "attempt": job.attempt}


def start_a_sleeper_then_spin(job: JobContext) -> None:
    """Starts a process of its own (its pid in the payload's file), then loops."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    Path(job.payload["pid_file"]).write_text(str(sleeper.pid))  # type: ignore[index,arg-type]
    while True:
        pass


def return_what_cannot_come_back(job: JobContext) -> object:
    return {"error": NeedsTwoArguments(1, "pickles, and cannot be made again from its pickle")}


def report_pid(job: JobContext) -> int:
    return os.getpid()


def refuse(job: JobContext) -> None:
    raise NotWorthRetrying("bad input")


def raise_two_arguments(job: JobContext) -> None:
    raise NeedsTwoArguments(7, "no")


def snooze_first_time(job: JobContext) -> int:
    if job.snoozes == 0:
        raise Snooze(0.1)
    return job.snoozes


def die(job: JobContext) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def allocate(job: JobContext) -> int:
    block = bytearray(400 * 1024 * 1024)
    return len(block)


def burn_cpu(job: JobContext) -> int:
    """Pure Python arithmetic for about eight seconds: it holds its GIL throughout."""
    ends = time.monotonic() + 8.0
    count = 0
    while time.monotonic() < ends:
        count += 1
    return count


@pytest.fixture
def make(store_url: str) -> Iterator[Callable[..., Headgate]]:
    made: list[Headgate] = []

    def build(**kwargs: object) -> Headgate:
        hg = Headgate(store_url, config=RuntimeConfig(lease_ttl_ms=2_000), **kwargs)  # type: ignore[arg-type]
        made.append(hg)
        return hg

    yield build
    for hg in made:
        hg.close()


def wait_for(hg: Headgate, job_id: str, states: set[str], within_s: float = 20.0) -> str:
    ends = time.monotonic() + within_s
    while time.monotonic() < ends:
        state = hg.jobs.get(job_id).state
        if state in states:
            return state
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} is {hg.jobs.get(job_id).state}, not one of {states}")


def test_a_handler_in_an_infinite_loop_is_killed_at_its_deadline_and_retried(
    make: Callable[..., Headgate],
) -> None:
    hg = make()
    hg.handler("spin", executor="process", timeout_ms=1_500, retry=Retry(intervals_s=(0,)))(
        spin_first_time
    )
    hg.start(QUICK, scheduler=False)
    job = hg.enqueue("spin")
    wait_for(hg, job.id, {"completed"}, within_s=30)
    done = hg.jobs.get(job.id)
    assert isinstance(done.result, dict)
    assert done.result["attempt"] == 2
    first = done.attempt_history[-1]
    assert (first.attempt, first.outcome) == (1, "timed_out")
    assert first.error_type == "TimeoutError"
    assert first.started_at_ms is not None
    # Killed at the deadline: the retry started within a moment of it, not after a thread
    # stuck in a loop gave its slot back (it never would).
    second = done.attempt_history[0]
    assert second.started_at_ms is not None
    assert second.started_at_ms - first.started_at_ms < 1_500 + 1_500
    assert done.result["pid"] != os.getpid()
    # Nothing holds a slot for it: the heartbeat (renewed every 500 ms) says so.
    ends = time.monotonic() + 3
    while hg.runtime.workers()[0].overdue and time.monotonic() < ends:
        time.sleep(0.05)
    assert hg.runtime.workers()[0].overdue == 0


def test_a_child_killed_at_its_deadline_takes_the_processes_it_started_with_it(
    make: Callable[..., Headgate], tmp_path: Path
) -> None:
    hg = make()
    hg.handler("sleeper", executor="process", timeout_ms=1_000, max_attempts=1)(
        start_a_sleeper_then_spin
    )
    hg.start(QUICK, scheduler=False)
    pid_file = tmp_path / "sleeper.pid"
    job = hg.enqueue("sleeper", {"pid_file": str(pid_file)})
    assert wait_for(hg, job.id, {"failed"}) == "failed"
    assert hg.jobs.get(job.id).attempt_history[0].outcome == "timed_out"
    sleeper = int(pid_file.read_text())
    ends = time.monotonic() + 5
    while process_running(sleeper) and time.monotonic() < ends:
        time.sleep(0.05)
    assert not process_running(sleeper), "the handler's own process outlived its killed child"


def test_a_stuck_child_holds_no_slot_after_its_deadline(make: Callable[..., Headgate]) -> None:
    hg = make()
    hg.handler("spin", executor="process", timeout_ms=1_000, max_attempts=1)(spin_first_time)
    hg.handler("pid", executor="process")(report_pid)
    hg.start(WorkerConfig(queues={"default": 1}, poll_interval_ms=50), scheduler=False)
    stuck = hg.enqueue("spin")
    after = hg.enqueue("pid")
    assert wait_for(hg, stuck.id, {"failed"}) == "failed"
    assert wait_for(hg, after.id, {"completed"}) == "completed"


def test_an_exception_comes_back_as_its_class_for_the_retry_policy(
    make: Callable[..., Headgate],
) -> None:
    hg = make()
    policy = Retry(fail_on=(NotWorthRetrying,), intervals_s=(0,))
    hg.handler("refuse", executor="process", retry=policy, max_attempts=5)(refuse)
    hg.handler("two", executor="process", max_attempts=1)(raise_two_arguments)
    hg.start(QUICK, scheduler=False)
    refused = hg.enqueue("refuse")
    two = hg.enqueue("two")
    assert wait_for(hg, refused.id, {"failed"}) == "failed"
    job = hg.jobs.get(refused.id)
    assert job.attempts == 1  # not retried: the policy saw NotWorthRetrying itself
    assert job.attempt_history[0].error_type == f"{__name__}.NotWorthRetrying"
    assert job.attempt_history[0].error_message == "bad input"
    assert wait_for(hg, two.id, {"failed"}) == "failed"
    ended = hg.jobs.get(two.id).attempt_history[0]
    assert (ended.error_type, ended.error_message) == (f"{__name__}.NeedsTwoArguments", "7: no")


def test_a_snooze_in_a_child_snoozes_its_job(make: Callable[..., Headgate]) -> None:
    hg = make()
    hg.handler("snooze", executor="process", max_attempts=1)(snooze_first_time)
    hg.start(QUICK, scheduler=False)
    job = hg.enqueue("snooze")
    assert wait_for(hg, job.id, {"completed", "failed"}) == "completed"
    done = hg.jobs.get(job.id)
    assert done.result == 1
    assert [attempt.outcome for attempt in reversed(done.attempt_history)] == [
        "snoozed",
        "succeeded",
    ]


def test_a_result_that_cannot_come_back_fails_its_attempt_at_once(
    make: Callable[..., Headgate],
) -> None:
    hg = make()
    hg.handler("odd", executor="process", max_attempts=1, timeout_ms=30_000)(
        return_what_cannot_come_back
    )
    hg.handler("pid", executor="process")(report_pid)
    hg.start(WorkerConfig(queues={"default": 1}, poll_interval_ms=50), scheduler=False)
    began = time.monotonic()
    odd = hg.enqueue("odd")
    assert wait_for(hg, odd.id, {"failed"}) == "failed"
    assert time.monotonic() - began < 10, "failed when it answered, not at its timeout"
    ended = hg.jobs.get(odd.id).attempt_history[0]
    assert ended.outcome == "failed"
    assert str(ended.error_type).endswith("InvalidResult"), ended.error_type
    after = hg.enqueue("pid")  # its one slot still serves
    assert wait_for(hg, after.id, {"completed"}) == "completed"


def return_two_megabytes(job: JobContext) -> str:
    return "x" * 2_000_000


def test_a_result_over_the_limit_is_refused_in_the_child(make: Callable[..., Headgate]) -> None:
    hg = make()
    hg.handler("big", executor="process", max_attempts=1)(return_two_megabytes)
    hg.start(WorkerConfig(poll_interval_ms=50, max_result_bytes=1_000), scheduler=False)
    big = hg.enqueue("big")
    assert wait_for(hg, big.id, {"failed"}) == "failed"
    ended = hg.jobs.get(big.id).attempt_history[0]
    assert str(ended.error_type).endswith("InvalidResult")
    assert "the limit is 1000" in str(ended.error_message)


def test_an_idle_child_that_died_is_replaced_not_blamed_on_the_next_job(
    make: Callable[..., Headgate],
) -> None:
    hg = make()
    hg.handler("pid", executor="process")(report_pid)
    hg.start(WorkerConfig(queues={"default": 1}, poll_interval_ms=50), scheduler=False)
    first = hg.enqueue("pid")
    wait_for(hg, first.id, {"completed"})
    child = hg.jobs.get(first.id).result
    assert isinstance(child, int)
    os.kill(child, signal.SIGKILL)
    time.sleep(0.2)
    second = hg.enqueue("pid")
    assert wait_for(hg, second.id, {"completed"}) == "completed"
    ran = hg.jobs.get(second.id)
    assert (ran.crash_count, ran.attempts) == (0, 1)
    assert ran.result != child


def test_a_child_that_dies_is_a_crash_and_quarantines_at_the_crash_limit(
    make: Callable[..., Headgate],
) -> None:
    hg = make()
    hg.handler("die", executor="process")(die)
    hg.start(WorkerConfig(poll_interval_ms=50, crash_limit=2), scheduler=False)
    job = hg.enqueue("die", {"n": 1})
    assert wait_for(hg, job.id, {"quarantined"}) == "quarantined"
    ended = hg.jobs.get(job.id)
    assert ended.crash_count == 2
    assert ended.attempts == 0
    assert [a.outcome for a in ended.attempt_history][-1] == "crashed"
    assert hg.runtime.workers()[0].running == 0  # the worker itself lives on


def test_a_child_over_its_memory_limit_fails_the_attempt(make: Callable[..., Headgate]) -> None:
    hg = make()
    hg.handler("allocate", executor="process", max_attempts=1)(allocate)
    hg.start(WorkerConfig(poll_interval_ms=50, child_memory_limit_mb=256), scheduler=False)
    job = hg.enqueue("allocate")
    assert wait_for(hg, job.id, {"failed"}) == "failed"
    assert hg.jobs.get(job.id).attempt_history[0].error_type == "MemoryError"


def test_a_child_is_kept_and_replaced_after_max_jobs_per_child(
    make: Callable[..., Headgate],
) -> None:
    hg = make()
    hg.handler("pid", executor="process")(report_pid)
    hg.start(
        WorkerConfig(queues={"default": 1}, poll_interval_ms=50, max_jobs_per_child=2),
        scheduler=False,
    )
    pids = []
    for _ in range(4):
        job = hg.enqueue("pid")
        wait_for(hg, job.id, {"completed"})
        pids.append(hg.jobs.get(job.id).result)
    assert pids[0] == pids[1] != pids[2] == pids[3]
    assert os.getpid() not in pids


def test_drain_runs_a_process_handler_in_a_child(make: Callable[..., Headgate]) -> None:
    hg = make()
    hg.handler("pid", executor="process")(report_pid)
    hg.handler("die", executor="process")(die)
    job = hg.enqueue("pid")
    crashing = hg.enqueue("die")
    summary = hg.drain(timeout=20)
    # A crashed job is due again at once: drain runs it until the crash limit (3).
    assert (summary.succeeded, summary.crashed) == (1, 3)
    assert hg.jobs.get(job.id).result not in (None, os.getpid())
    crashed = hg.jobs.get(crashing.id)
    assert (crashed.state, crashed.crash_count) == ("quarantined", 3)


class CommitTimes(EnqueueHook):
    """When each tick's job committed, by tick."""

    def __init__(self) -> None:
        self.late_ms: dict[int, int | None] = {}

    def after_enqueue(self, context: TickContext, result: AttemptResult) -> None:
        committed = result.committed_at_ms
        self.late_ms[context.tick_ms] = None if committed is None else committed - context.tick_ms


def test_cpu_bound_handlers_in_children_leave_the_ticks_on_time(
    make: Callable[..., Headgate],
) -> None:
    commits = CommitTimes()
    hg = make(hooks=[commits])
    hg.handler("burn", executor="process", timeout_ms=60_000)(burn_cpu)
    hg.start(WorkerConfig(queues={"default": 4}, poll_interval_ms=50))
    burning = [hg.enqueue("burn", {"n": each}) for each in range(4)]
    for job in burning:
        wait_for(hg, job.id, {"running"})
    hg.schedules.put("tick", spec="@every:1000", kind="nothing", queue="ticks")
    time.sleep(5.6)
    assert all(hg.jobs.get(job.id).state == "running" for job in burning)
    lateness = dict(commits.late_ms)
    assert len(lateness) >= 4
    assert None not in lateness.values(), f"a tick did not commit: {lateness}"
    median = statistics.median(ms for ms in lateness.values() if ms is not None)
    assert median <= LATE_MS, f"ticks committed late (ms): {lateness}"


def test_a_process_handler_must_be_a_module_level_sync_function(hg: Headgate) -> None:
    def nested(job: JobContext) -> None:
        return None

    async def asynchronous(job: JobContext) -> None:
        return None

    with pytest.raises(ValidationError, match=r"executor.*top level of a module"):
        hg.handler("nested", executor="process")(nested)
    with pytest.raises(ValidationError, match=r"executor.*sync handlers"):
        hg.handler("async", executor="process")(asynchronous)
    with pytest.raises(ValidationError, match=r"executor.*'thread' or 'process'"):
        hg.handler("fork", executor="fork")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="child_memory_limit_mb"):
        WorkerConfig(child_memory_limit_mb=1)
    with pytest.raises(ValueError, match="max_jobs_per_child"):
        WorkerConfig(max_jobs_per_child=0)
