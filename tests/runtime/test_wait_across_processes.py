"""`JobHandle.wait` in one process returns as soon as a worker in another records
the job's end: woken by the store's notification (NOTIFY on PostgreSQL), not
by its one-second re-read. Real processes, the real clock."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from headgate import Headgate
from headgate._store.port import JOBS_ENDED

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
WORKER = textwrap.dedent(
    """
    import sys, threading, time
    from headgate import Headgate, WorkerConfig
    hg = Headgate(sys.argv[1])

    @hg.task("stamp")
    def stamp(pause_s: float) -> float:
        time.sleep(pause_s)
        return time.time()  # when the handler returned: before its end is recorded

    hg.start(WorkerConfig(queues={"default": 2}), scheduler=False)
    print("ready", flush=True)
    threading.Event().wait(120)
    """
)


def stamp(pause_s: float) -> float:
    """The worker's task, as the waiting process knows it (it runs no worker)."""
    raise AssertionError("runs in the worker's process only")


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_wait_returns_within_50_ms_of_the_end_in_another_process(store_url: str) -> None:
    hg = Headgate(store_url)
    task = hg.task("stamp")(stamp)
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, store_url],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        task.enqueue(0.0).wait(timeout=30)  # the worker's first claim, and our listener, settled
        lags = []
        for _ in range(7):
            handle = task.enqueue(0.3)  # still running when the wait starts
            returned = handle.wait(timeout=30)
            lags.append(time.time() - returned)
        assert statistics.median(lags) < 0.05, lags
        assert max(lags) < 0.5, lags  # never the re-read a second later
    finally:
        worker.kill()
        worker.wait(timeout=10)
        hg.close()


def _ended_notifications(server_url: str, schema: str, during: Callable[[], None]) -> list[str]:
    """The payloads announcing the ends of `schema`'s jobs sent while `during` ran."""
    import psycopg

    url = make_url(server_url).set(drivername="postgresql", query={})
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as listener:
        listener.execute("LISTEN headgate_enqueued")
        during()
        time.sleep(0.2)
        return [
            note.payload
            for note in listener.notifies(timeout=0.5, stop_after=1000)
            if note.payload.startswith(schema) and JOBS_ENDED in note.payload
        ]


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_only_the_ends_of_jobs_someone_may_wait_on_are_announced(
    store_url: str, postgres_server_url: str
) -> None:
    """A task's job has a handle to wait on; a handler's has none: announcing its
    end would only make every worker's commit take PostgreSQL's NOTIFY lock."""
    schema = make_url(store_url).query["options"].partition("search_path=")[2]
    with Headgate(store_url) as hg:
        hg.handler("plain")(lambda job: None)
        hg.task("awaited")(_noop)

        def run_plain() -> None:
            hg.enqueue("plain")
            hg.drain()

        def run_awaited() -> None:
            hg.enqueue("awaited", {})
            hg.drain()

        assert _ended_notifications(postgres_server_url, schema, run_plain) == []
        assert len(_ended_notifications(postgres_server_url, schema, run_awaited)) == 1


def _noop() -> None:
    return None
