"""Three host processes sharing one store run a schedule's jobs and a backlog
while they are SIGKILLed one after another (the scheduler among them) and
replaced, on the real clock: every tick has one job, every job completes,
and each job's stream holds exactly one completion.

The jobs all share one fingerprint (one kind, no payload), and every kill
blames the jobs its process ran; that none is quarantined shows the
completions clearing that blame, as they must for a fleet that loses
processes for reasons of its own.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import text

from headgate import Headgate, RuntimeConfig

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
LEASE_TTL_MS = 1_500
INTERVAL_MS = 100
BACKLOG = 400
KILLS = 6
HOST = textwrap.dedent(
    """
    import signal, sys, threading, time
    from headgate import Headgate, RuntimeConfig, WorkerConfig

    hg = Headgate(sys.argv[1], config=RuntimeConfig(lease_ttl_ms=int(sys.argv[2])))

    @hg.handler("work")
    def work(job):
        time.sleep(0.05)
        return job.attempt

    def stop(*_):
        hg.close()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    hg.start(WorkerConfig(queues={"default": 4}, heartbeat_ttl_ms=1000,
                          rescue_interval_ms=200, poll_interval_ms=50))
    print("ready", flush=True)
    threading.Event().wait()
    """
)


def _host(url: str, output: Path) -> subprocess.Popen[bytes]:
    """A host process, returned once its runtime has started."""
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, url, str(LEASE_TTL_MS)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=output.open("w"),
        stderr=subprocess.STDOUT,
    )
    _eventually(lambda: "ready" in output.read_text() or host.poll() is not None, 30, "a host")
    assert host.poll() is None, output.read_text()
    return host


def _eventually(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.05)


def _pids_running_jobs(hg: Headgate) -> set[int]:
    return {worker.pid for worker in hg.runtime.workers() if worker.running_job_ids}


def test_hosts_killed_and_replaced_lose_no_job_and_complete_each_once(
    store_url: str, tmp_path: Path
) -> None:
    observer = Headgate(
        store_url, config=RuntimeConfig(lease_ttl_ms=LEASE_TTL_MS, min_interval_ms=INTERVAL_MS)
    )
    for _ in range(BACKLOG):
        observer.enqueue("work")
    observer.schedules.put(
        "pulse",
        spec=f"@every:{INTERVAL_MS}",
        kind="work",
        on_missed="backfill",
        backfill_max=1000,
    )
    rng = random.Random(13)
    hosts: list[subprocess.Popen[bytes]] = []
    killed: list[subprocess.Popen[bytes]] = []
    try:
        hosts = [_host(store_url, tmp_path / f"host{n}.log") for n in range(3)]
        _eventually(lambda: observer.runtime.lease() is not None, 30, "a scheduler")
        for kill in range(KILLS):
            time.sleep(1.0)
            lease = observer.runtime.lease()
            holder = next((h for h in hosts if lease and h.pid == lease.pid), None)
            busy = [h for h in hosts if h.pid in _pids_running_jobs(observer)]
            victim = (
                holder
                if kill % 2 == 0 and holder is not None
                else rng.choice(busy or hosts)  # one running jobs, so some are rescued
            )
            victim.kill()
            victim.wait(timeout=10)
            killed.append(victim)
            hosts[hosts.index(victim)] = _host(store_url, tmp_path / f"host{3 + kill}.log")
        observer.schedules.put(
            "pulse",
            spec=f"@every:{INTERVAL_MS}",
            kind="work",
            on_missed="backfill",
            backfill_max=1000,
            paused=True,
        )

        def settled() -> bool:
            # One read: a rescue between a read of pending jobs and one of running
            # jobs would move its jobs past both.
            with observer._core.store.engine.connect() as connection:
                unfinished = connection.execute(
                    text("SELECT count(*) FROM headgate_jobs WHERE state IN ('pending', 'running')")
                ).scalar_one()
            return bool(unfinished == 0)

        _eventually(settled, 60, "every job to finish")
        for host in hosts:
            host.send_signal(signal.SIGTERM)
        for host in hosts:
            assert host.wait(timeout=30) == 0

        with observer._core.store.engine.connect() as connection:
            states: dict[str, int] = {
                state: count
                for state, count in connection.execute(
                    text("SELECT state, count(*) FROM headgate_jobs GROUP BY state")
                )
            }
            ticks = [
                int(tick)
                for (tick,) in connection.execute(
                    text(
                        "SELECT periodic_tick_ms FROM headgate_jobs"
                        " WHERE periodic_schedule_id = 'pulse' ORDER BY 1"
                    )
                )
            ]
            completions: dict[str, int] = {
                stream: count
                for stream, count in connection.execute(
                    text(
                        "SELECT stream_id, count(*) FROM headgate_events"
                        " WHERE type = 'JobSucceeded' GROUP BY stream_id"
                    )
                )
            }
            crashes = connection.execute(
                text("SELECT coalesce(sum(crash_count), 0) FROM headgate_jobs")
            ).scalar_one()
        total = sum(states.values())
        assert states == {"completed": total}, "every job completed; none failed or quarantined"
        assert total >= BACKLOG + 30
        assert ticks == list(range(ticks[0], ticks[-1] + INTERVAL_MS, INTERVAL_MS)), (
            "every tick from first to last has exactly one job, across the scheduler's deaths"
        )
        assert len(completions) == total and set(completions.values()) == {1}, (
            "each job's stream holds exactly one completion"
        )
        assert crashes >= 1, "some jobs were running on a killed host and were rescued"
    finally:
        for host in hosts:
            if host.poll() is None:
                host.kill()
                host.wait(timeout=10)
        observer.close()
