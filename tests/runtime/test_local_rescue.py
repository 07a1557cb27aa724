"""A worker rescues the jobs of a dead worker of its own machine at once, lease or
not, and leaves every worker it cannot prove dead to the heartbeat TTL.

Each dead worker is a heartbeat row written with the identity of a real child
process, killed and reaped; the clock is fake and never reaches the TTL unless
a test moves it. Stores are real, on both backends.
"""

from __future__ import annotations

import dataclasses
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from headgate import Headgate, JobContext, WorkerConfig
from headgate._domain.events import JobAbandoned, JobClaimed
from headgate._domain.streams import job_stream
from headgate._runtime.duties import DutyKeeper
from headgate._runtime.heartbeat import worker_identity
from headgate._runtime.local_processes import LocalProcesses, start_ticks_in
from headgate._runtime.maintenance import ExpiredRescue, LocalRescue
from headgate._runtime.rescuer import Rescuer
from headgate._store.port import ProcessIdentity, Store, WorkerBeat, WorkerRow, Workers
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from tests.faults import FaultyStore

HERE = LocalProcesses()
TTL_MS = 10_000
CONFIG = WorkerConfig(heartbeat_ttl_ms=TTL_MS, rescue_interval_ms=100, poll_interval_ms=20)
pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(HERE.here is None, reason="needs Linux's /proc"),
]


def _identity_of(pid: int) -> ProcessIdentity:
    assert HERE.here is not None
    start_ticks = start_ticks_in(Path(f"/proc/{pid}/stat").read_text())
    assert start_ticks is not None
    return dataclasses.replace(HERE.here, start_ticks=start_ticks)


@pytest.fixture
def spawn() -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    children: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        children.append(subprocess.Popen(["sleep", "60"]))
        return children[-1]

    yield start
    for child in children:
        child.kill()
        child.wait(timeout=30)


def _worker_running(
    store: Store, worker_id: str, pid: int, process: ProcessIdentity | None, job_ids: list[str]
) -> None:
    """A worker's heartbeat row, and its claims of these jobs."""
    beat = WorkerBeat(worker_id, "localhost", pid, {"default": 4}, 0, len(job_ids), 0, process)
    store.workers.beat(beat, ttl_ms=TTL_MS)
    for job_id in job_ids:
        version = store.log.stream_version(job_stream(job_id))
        store.log.append(job_stream(job_id), version, [JobClaimed(job_id, worker_id, 1, 10**13)])


def _died(spawn: Callable[[], subprocess.Popen[bytes]]) -> tuple[int, ProcessIdentity]:
    """A process that ran on this machine and is gone: its pid and identity."""
    child = spawn()
    identity = _identity_of(child.pid)
    child.kill()
    child.wait(timeout=30)
    return child.pid, identity


def _eventually(predicate: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _rescuer(store: Store, clock: FakeClock) -> Rescuer:
    return Rescuer(store, clock, worker_identity("rescuer"), CONFIG)


def _keeper(store: Store, clock: FakeClock, rescuer: Rescuer) -> DutyKeeper:
    """A keeper of both rescues, run by the test (`run_due`)."""
    interval = CONFIG.rescue_interval_ms
    duties = [ExpiredRescue(rescuer, interval), LocalRescue(rescuer, interval)]
    return DutyKeeper(store, clock, worker_identity("keeper"), duties, lease_ttl_ms=3 * interval)


def test_a_dead_worker_of_this_machine_is_rescued_before_its_heartbeat_expires(
    hg: Headgate, clock: FakeClock, spawn: Callable[[], subprocess.Popen[bytes]]
) -> None:
    jobs = [hg.enqueue("k", {"n": n}) for n in range(2)]
    pid, identity = _died(spawn)
    _worker_running(hg._core.store, "dead", pid, identity, [job.id for job in jobs])
    rescuer = _rescuer(hg._core.store, clock)
    assert rescuer.rescue_local() == 2  # the clock has not moved: its heartbeat is fresh
    for job in jobs:
        rescued = hg.jobs.get(job.id)
        assert (rescued.state, rescued.crash_count, rescued.worker_id) == ("pending", 1, None)
        assert rescued.attempt_history[0].outcome == "crashed"
    assert hg._core.store.workers.live(clock.now_ms()) == [], "the dead worker is forgotten"
    assert rescuer.rescue_local() == 0


def test_workers_that_cannot_be_proven_dead_wait_for_their_ttl(
    hg: Headgate, clock: FakeClock, spawn: Callable[[], subprocess.Popen[bytes]]
) -> None:
    """Alive on this machine; dead, but under another boot (another machine), in
    another pid namespace, or with no identity (an earlier build, not Linux)."""
    alive = spawn()
    pid, identity = _died(spawn)
    rows = {
        "alive": (alive.pid, _identity_of(alive.pid)),
        "another-boot": (pid, dataclasses.replace(identity, boot_id="another-machine")),
        "another-namespace": (pid, dataclasses.replace(identity, namespaces="pid:[1] time:[2]")),
        "no-identity": (pid, None),
    }
    jobs = {worker_id: hg.enqueue("k", worker_id) for worker_id in rows}
    for worker_id, (worker_pid, process) in rows.items():
        _worker_running(hg._core.store, worker_id, worker_pid, process, [jobs[worker_id].id])
    rescuer = _rescuer(hg._core.store, clock)
    keeper = _keeper(hg._core.store, clock, rescuer)
    assert keeper.run_due() == ["rescue"]
    assert rescuer.rescue_local() == 0
    assert rescuer.rescued == 0
    assert {hg.jobs.get(job.id).state for job in jobs.values()} == {"running"}
    clock.advance(TTL_MS)
    assert keeper.run_due() == ["rescue", "local rescue"]
    assert rescuer.rescued == 4, "the TTL rule rescues them all once they expire"
    assert {hg.jobs.get(job.id).crash_count for job in jobs.values()} == {1}
    keeper.stop()


def test_two_rescuers_of_one_dead_worker_at_once_count_its_crash_once(
    store_url: str, clock: FakeClock, spawn: Callable[[], subprocess.Popen[bytes]]
) -> None:
    """Two restarted workers of one machine (neither holds the rescuer lease),
    each with a store of its own, rescue the same dead worker concurrently."""
    hg = Headgate(store_url, clock=clock)
    jobs = [hg.enqueue("k", {"n": n}) for n in range(3)]
    pid, identity = _died(spawn)
    _worker_running(hg._core.store, "dead", pid, identity, [job.id for job in jobs])
    stores = [SqlStore(store_url, clock) for _ in range(2)]
    rescuers = [_rescuer(store, clock) for store in stores]
    together = threading.Barrier(2)
    taken: list[int] = []

    def rescue(rescuer: Rescuer) -> None:
        together.wait(timeout=30)
        taken.append(rescuer.rescue_local())

    threads = [threading.Thread(target=rescue, args=(r,)) for r in rescuers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    try:
        assert sorted(taken) == [0, 3]
        _assert_crashed_once(hg, [job.id for job in jobs])
    finally:
        for store in stores:
            store.close()
        hg.close()


class _ThenFirst(Workers):
    """The rows a rescuer reads, handed over only after another rescuer has
    rescued them: a rescuer whose look at /proc raced another's write."""

    def __init__(self, inner: Workers, first: Callable[[], object]) -> None:
        self._inner = inner
        self._first = first

    def beat(self, beat: WorkerBeat, ttl_ms: int) -> WorkerRow:
        return self._inner.beat(beat, ttl_ms)

    def stop(self, worker_id: str) -> None:
        self._inner.stop(worker_id)

    def live(self, now_ms: int) -> list[WorkerRow]:
        return self._inner.live(now_ms)

    def in_namespaces(self, boot_id: str, namespaces: str) -> list[WorkerRow]:
        rows = self._inner.in_namespaces(boot_id, namespaces)
        self._first()
        return rows


def test_a_rescue_decided_on_rows_another_rescuer_has_taken_counts_nothing(
    store_url: str, clock: FakeClock, spawn: Callable[[], subprocess.Popen[bytes]]
) -> None:
    hg = Headgate(store_url, clock=clock)
    jobs = [hg.enqueue("k", {"n": n}) for n in range(2)]
    pid, identity = _died(spawn)
    _worker_running(hg._core.store, "dead", pid, identity, [job.id for job in jobs])
    other = _rescuer(SqlStore(store_url, clock), clock)
    late_store = FaultyStore(SqlStore(store_url, clock))
    late_store.workers = _ThenFirst(late_store.inner.workers, other.rescue_local)
    late = _rescuer(late_store, clock)
    try:
        assert late.rescue_local() == 0
        assert other.rescued == 2
        _assert_crashed_once(hg, [job.id for job in jobs])
    finally:
        late_store.close()
        hg.close()


def _assert_crashed_once(hg: Headgate, job_ids: list[str]) -> None:
    for job_id in job_ids:
        events = [e.event for e in hg._core.store.log.read_stream(job_stream(job_id))]
        assert sum(isinstance(e, JobAbandoned) for e in events) == 1, events
        assert hg.jobs.get(job_id).crash_count == 1


def test_a_starting_worker_runs_its_dead_predecessors_jobs_without_a_ttl_or_lease(
    hg: Headgate, clock: FakeClock, spawn: Callable[[], subprocess.Popen[bytes]]
) -> None:
    """The fake clock never moves, so the predecessor's heartbeat never expires
    (and the rescuer lease it could hold never would): only the starting
    worker's own check of this machine's processes gives the job back."""
    ran = threading.Event()

    @hg.handler("k")
    def handle(job: JobContext) -> int:
        ran.set()
        return job.crash_count

    job = hg.enqueue("k")
    pid, identity = _died(spawn)
    _worker_running(hg._core.store, "predecessor", pid, identity, [job.id])
    hg.start(CONFIG, scheduler=False)
    assert ran.wait(timeout=30), "the orphan never ran"
    _eventually(lambda: hg.jobs.get(job.id).state == "completed", "its end to be recorded")
    done = hg.jobs.get(job.id)
    assert (done.state, done.crash_count, done.result) == ("completed", 1, 1)


def test_the_rescue_that_quarantines_a_fingerprint_holds_its_waiting_jobs_with_it(
    hg: Headgate, clock: FakeClock, spawn: Callable[[], subprocess.Popen[bytes]]
) -> None:
    """A crash loop's backlog (or a schedule's ticks enqueued meanwhile) would crash
    a worker each: they are quarantined in the write that quarantines their
    fingerprint, the rest left alone."""
    poison = [hg.enqueue("k", {"bad": True}, queue=queue) for queue in ("a", "a", "b", "a")]
    later = hg.enqueue("k", {"bad": True}, run_at_ms=clock.now_ms() + 3_600_000)
    healthy = hg.enqueue("k", {"bad": False})
    rescuer = Rescuer(
        hg._core.store,
        clock,
        worker_identity("rescuer"),
        dataclasses.replace(CONFIG, crash_limit=2),
    )
    pid, identity = _died(spawn)
    _worker_running(hg._core.store, "first", pid, identity, [poison[0].id])
    assert rescuer.rescue_local() == 1  # one crash: claimable again, nothing held
    assert {hg.jobs.get(job.id).state for job in [*poison, later, healthy]} == {"pending"}
    pid, identity = _died(spawn)
    _worker_running(hg._core.store, "second", pid, identity, [poison[0].id])
    with capture_logs() as logs:
        assert rescuer.rescue_local() == 1
    assert hg.quarantine.get(hg.quarantine.fingerprint("k", {"bad": True})) is not None
    held = {job.id: hg.jobs.get(job.id) for job in [*poison, later]}
    assert {job.state for job in held.values()} == {"quarantined"}
    assert [job.crash_count for job in held.values()] == [2, 0, 0, 0, 0]
    assert hg.jobs.get(healthy.id).state == "pending"
    (said,) = [line for line in logs if line["event"].startswith("jobs of a fingerprint")]
    assert said["jobs"] == 4 and set(said["job_ids"]) == {job.id for job in [*poison[1:], later]}
    retried = hg.jobs.retry(poison[1].id)
    assert retried.state == "pending", "an operator may still run one by hand"
