"""A worker process restarted by a supervisor, as systemd or a shell loop does,
on the real clock and the default heartbeat TTL (10 s).

A restarted worker rescues the previous incarnation's jobs at its start (its
process is gone from this machine: boot id, pid namespace and start time say
so for certain), not a heartbeat TTL later. So a poison job that kills every
worker claiming it is quarantined after about `crash_limit` deaths, whatever
the TTL, and a healthy job the dead worker held runs again within about a
second of the restart.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.process import BaseProcess
from multiprocessing.sharedctypes import Synchronized

import pytest

from headgate import Headgate, JobContext, WorkerConfig
from headgate._runtime.local_processes import LocalProcesses

POISONED = 8
"""Poison jobs of one kind and payload, enqueued before the first worker starts."""
POISON_EXIT = 70
TTL_S = WorkerConfig().heartbeat_ttl_ms / 1000

pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(
        LocalProcesses().here is None,
        reason="needs Linux's /proc to tell a dead process for certain",
    ),
]


def _work(url: str, starting: Synchronized[float]) -> None:
    """A worker process of the store at `url`, with the default heartbeat TTL;
    it sets `starting` to the wall-clock time it starts its workers."""
    hg = Headgate(url)

    @hg.handler("poison", queue="poison")
    def poison(job: JobContext) -> None:
        os._exit(POISON_EXIT)  # what a segfault or a C extension's abort() leaves behind

    @hg.handler("steady", queue="steady")
    def steady(job: JobContext) -> dict[str, int]:
        if job.crash_count == 0:
            threading.Event().wait(60)  # held until this process is killed
        return {"pid": os.getpid()}

    starting.value = time.time()
    hg.start(WorkerConfig(queues={"poison": 1, "steady": 1}, poll_interval_ms=50), scheduler=False)
    threading.Event().wait(60)


def _eventually(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class Supervisor:
    """Starts worker processes of this test's store, one at a time, as a process
    manager restarts a service. Each is forked from a server that imported
    Headgate once (multiprocessing's forkserver, as a preloading app server
    does), so a restart takes milliseconds, not an interpreter's start."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(["headgate", __name__])
        self.children: list[BaseProcess] = []

    def start(self) -> tuple[BaseProcess, Synchronized[float]]:
        """A new worker process, and where it will say when it starts its workers."""
        starting: Synchronized[float] = self._context.Value("d", 0.0)  # type: ignore[assignment]
        child = self._context.Process(target=_work, args=(self._url, starting), daemon=True)
        child.start()
        self.children.append(child)
        return child, starting

    def stop_all(self) -> None:
        for child in self.children:
            if child.is_alive():
                child.kill()
            child.join(timeout=30)


@pytest.fixture
def supervisor(store_url: str) -> Iterator[Supervisor]:
    running = Supervisor(store_url)
    yield running
    running.stop_all()


def _quarantined(hg: Headgate, fingerprint: str) -> bool:
    return hg.quarantine.get(fingerprint) is not None


def test_a_crash_loop_is_quarantined_after_three_deaths_whatever_the_ttl(
    store_url: str, supervisor: Supervisor
) -> None:
    hg = Headgate(store_url)
    fingerprint = hg.quarantine.fingerprint("poison", {"bad": True})
    for _ in range(POISONED):
        hg.enqueue("poison", {"bad": True}, queue="poison")
    began = time.monotonic()
    deaths = 0
    while not _quarantined(hg, fingerprint) and deaths < POISONED:
        child, _ = supervisor.start()
        deadline = time.monotonic() + 30
        while child.is_alive() and not _quarantined(hg, fingerprint):
            assert time.monotonic() < deadline, "the worker neither died nor quarantined"
            time.sleep(0.02)
        if not child.is_alive():
            child.join()
            assert child.exitcode == POISON_EXIT
            deaths += 1
    took = time.monotonic() - began
    entry = hg.quarantine.get(fingerprint)
    assert entry is not None, f"not quarantined after {deaths} deaths"
    before, in_all = _deaths(hg)
    print(f"\ncrash loop: quarantined after {before} deaths ({deaths} seen), {took:.1f} s")
    assert before <= 4, f"{before} workers died of it before it was quarantined"
    assert "crash limit" in entry.note
    # The backlog is held with its fingerprint: nothing is left to kill the next worker.
    assert {job.state for job in hg.jobs.list(kind="poison").jobs} == {"quarantined"}
    assert before == deaths, "every death is recorded as the crash of its attempt"
    assert in_all == before, "no poison job killed a worker after the quarantine"
    hg.close()


def _deaths(hg: Headgate) -> tuple[int, int]:
    """Workers a poison job killed, as the rescues recorded them (each crashed
    attempt is a JobAbandoned, or the JobQuarantined that held it): up to the
    quarantine's write, and in all."""
    kinds = {job.id: job.kind for job in hg.jobs.list(limit=200).jobs}
    log = hg._core.store.log.read_all(0, 10_000)
    quarantined_at = next(
        (r.recorded_at_ms for r in log if r.type == "FingerprintQuarantined"), None
    )
    assert quarantined_at is not None, "no quarantine in the log"
    crashes = [
        recorded
        for recorded in log
        if recorded.type in ("JobAbandoned", "JobQuarantined")
        and recorded.event.attempt is not None  # type: ignore[attr-defined]
        and kinds[recorded.event.job_id] == "poison"  # type: ignore[attr-defined]
    ]
    before = sum(1 for recorded in crashes if recorded.recorded_at_ms <= quarantined_at)
    return before, len(crashes)


def test_a_restarted_workers_orphans_run_again_within_a_second(
    store_url: str, supervisor: Supervisor
) -> None:
    hg = Headgate(store_url)
    job = hg.enqueue("steady", queue="steady")
    first, _ = supervisor.start()
    _eventually(lambda: hg.jobs.get(job.id).state == "running", 30, "the first worker's claim")
    first.kill()
    first.join(timeout=30)
    second, restarted = supervisor.start()
    _eventually(lambda: hg.jobs.get(job.id).state == "completed", 30, "the orphan to run again")
    done = hg.jobs.get(job.id)
    ran_again_in = done.updated_at_ms / 1000 - restarted.value
    print(f"\norphan: ran again {ran_again_in:.2f} s after the restarted worker started")
    assert (done.crash_count, done.result) == (1, {"pid": second.pid})
    # About 0.3 s on a quiet machine; the bound is half the TTL, for a loaded one.
    assert ran_again_in < TTL_S / 2, f"{ran_again_in:.1f} s: it waited for the heartbeat TTL"
    hg.close()
