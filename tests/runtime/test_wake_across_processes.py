"""A worker in another process is woken by an enqueue at once, not at its next
poll: by NOTIFY on PostgreSQL, by the file's data version on SQLite. Real
processes, the real clock; the worker's poll is a minute, so only a wake-up
can make these jobs run within seconds."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from headgate import Headgate

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
WORKER = textwrap.dedent(
    """
    import sys, threading, time
    from headgate import Headgate, WorkerConfig
    hg = Headgate(sys.argv[1])

    @hg.handler("stamp")
    def stamp(job):
        return time.time()

    hg.start(WorkerConfig(queues={"default": 2}, poll_interval_ms=60_000), scheduler=False)
    print("ready", flush=True)
    threading.Event().wait(120)
    """
)


def test_an_idle_worker_in_another_process_is_woken_by_an_enqueue(store_url: str) -> None:
    hg = Headgate(store_url)
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, store_url],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # past the worker's first look, so it waits for a wake-up
        for _ in range(3):
            sent = time.time()
            job = hg.enqueue("stamp")
            deadline = time.monotonic() + 10
            while (done := hg.jobs.get(job.id)).state != "completed":
                assert time.monotonic() < deadline, "the worker was not woken"
                time.sleep(0.01)
            assert (
                isinstance(done.result, float) and done.result - sent < 1.0
            )  # its heartbeat alone wakes it every 2.5 s
    finally:
        worker.kill()
        worker.wait(timeout=10)
        hg.close()
