"""A fleet-wide limit across real host processes on the real clock: three hosts
share the store, their workers are SIGKILLed and replaced while they run, and
the jobs running per partition key are sampled from the store throughout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from headgate import EACH_PARTITION, Headgate
from headgate._operator import operator_of

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 2
JOBS_PER_TENANT = 80
TENANTS = ("tenant-a", "tenant-b")
HOST = textwrap.dedent(
    """
    import sys, threading, time
    from headgate import Headgate, WorkerConfig

    hg = Headgate(sys.argv[1])

    @hg.handler("report")
    def report(job):
        time.sleep(0.3)

    hg.start(
        WorkerConfig(queues={"default": 6}, poll_interval_ms=20, heartbeat_ttl_ms=1000),
        scheduler=False,
    )
    print("ready", flush=True)
    threading.Event().wait()
    """
)


def _eventually(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.05)


def _host(url: str, output: Path) -> subprocess.Popen[bytes]:
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, url],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=output.open("w"),
        stderr=subprocess.STDOUT,
    )
    _eventually(lambda: "ready" in output.read_text() or host.poll() is not None, 30, "a host")
    assert host.poll() is None, output.read_text()
    return host


def _running_jobs(hg: Headgate, hosts: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """A host that is running jobs now, as the store's worker rows say."""
    by_pid = {host.pid: host for host in hosts}
    found: list[subprocess.Popen[bytes]] = []

    def busy() -> bool:
        workers = hg.runtime.workers()
        found[:] = [by_pid[w.pid] for w in workers if w.running_job_ids and w.pid in by_pid]
        return bool(found)

    _eventually(busy, 30, "a host running jobs")
    return found[0]


class Sampler:
    """Reads the jobs running per partition key from the store, over and over."""

    def __init__(self, hg: Headgate) -> None:
        self._hg = hg
        self.most: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            [limit] = self._hg.limits.list()
            for key, running in limit.running_by_partition:
                self.most[key] = max(self.most.get(key, 0), running)
            self.samples += 1
            time.sleep(0.01)


def test_three_hosts_never_run_more_than_the_limit_per_partition_through_kills(
    store_url: str, tmp_path: Path
) -> None:
    hg = Headgate(store_url)
    try:
        hg.limits.set(partition_key=EACH_PARTITION, limit=LIMIT)
        for tenant in TENANTS:
            for n in range(JOBS_PER_TENANT):
                hg.enqueue("report", {"n": n}, partition_key=tenant)
        hosts: list[subprocess.Popen[bytes]] = []
        try:
            with Sampler(hg) as sampler:
                hosts += [_host(store_url, tmp_path / f"host{n}.txt") for n in range(3)]
                for round_number in range(2):
                    time.sleep(0.5)
                    victim = _running_jobs(hg, hosts)
                    hosts.remove(victim)
                    victim.send_signal(signal.SIGKILL)
                    victim.wait(10)
                    hosts.append(_host(store_url, tmp_path / f"replacement{round_number}.txt"))

                def all_done() -> bool:
                    counts = operator_of(hg).queue_status("default")
                    return counts.pending == 0 and counts.running == 0

                _eventually(all_done, 90, "every job to finish")
        finally:
            for host in hosts:
                host.send_signal(signal.SIGTERM)
            for host in hosts:
                host.wait(30)
        jobs = hg.jobs.list(limit=200).jobs
        assert sampler.samples > 50
        assert all(most <= LIMIT for most in sampler.most.values()), sampler.most
        assert sampler.most == dict.fromkeys(TENANTS, LIMIT), "the limit was reached, and held"
        assert len(jobs) == len(TENANTS) * JOBS_PER_TENANT
        assert {job.state for job in jobs} == {"completed"}
        assert any(job.crash_count for job in jobs), "a killed host was running jobs"
    finally:
        hg.close()


OVERRUNNING_HOST = textwrap.dedent(
    """
    import sys, threading, time
    from pathlib import Path
    from headgate import Headgate, WorkerConfig

    hg = Headgate(sys.argv[1])
    log = Path(sys.argv[2])

    @hg.handler("slow", timeout_s=1, max_attempts=1)
    def slow(job):  # deaf to job.cancelled: its thread runs 3 s, past its 1 s timeout
        with log.open("a") as out:
            out.write(f"start {time.time()}\\n")
        time.sleep(3)
        with log.open("a") as out:
            out.write(f"end {time.time()}\\n")

    hg.start(WorkerConfig(queues={"default": 4}, poll_interval_ms=20), scheduler=False)
    print("ready", flush=True)
    threading.Event().wait()
    """
)


def test_a_limit_holds_a_sync_handler_that_runs_past_its_timeout(
    store_url: str, tmp_path: Path
) -> None:
    """A thread cannot be killed: its job stays running (overdue) until it returns,
    so the limit it counts against holds, and the job is not retried beside it."""
    runs = tmp_path / "runs.log"
    runs.touch()
    with Headgate(store_url) as hg:
        hg.limits.set(kind="slow", limit=1)
        jobs = [hg.enqueue("slow", {"n": n}) for n in range(3)]
        host = subprocess.Popen(
            [sys.executable, "-c", OVERRUNNING_HOST, store_url, str(runs)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        try:
            seen_running: set[int] = set()
            seen_overdue = 0
            ends = time.monotonic() + 40
            while any(hg.jobs.get(job.id).state != "failed" for job in jobs):
                assert time.monotonic() < ends, [hg.jobs.get(job.id).state for job in jobs]
                seen_running.update(status.running for status in hg.limits.list())
                seen_overdue = max([seen_overdue, *(w.overdue for w in hg.runtime.workers())])
                time.sleep(0.05)
        finally:
            host.kill()
            host.wait()
        assert seen_running <= {0, 1}
        assert seen_overdue == 1, "the overdue thread shows in its worker's heartbeat"
        assert [hg.jobs.get(job.id).attempt_history[0].outcome for job in jobs] == ["timed_out"] * 3
    at_once = most = 0
    for line in runs.read_text().splitlines():
        at_once += 1 if line.startswith("start") else -1
        most = max(most, at_once)
    assert most == 1, runs.read_text()
