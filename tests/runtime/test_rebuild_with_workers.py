"""A job running while the jobs projection is rebuilt stays its worker's: the
worker is not told to stop when its job's row is missing or behind mid-rebuild,
nobody else claims it, and its end is recorded once the rebuild is done."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from headgate import Headgate, JobContext, RuntimeConfig, WorkerConfig
from headgate._store.sql.maintenance import rebuild
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock

FAST = WorkerConfig(poll_interval_ms=20, heartbeat_ttl_ms=400, rescue_interval_ms=100)


def _eventually(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_a_running_job_survives_a_rebuild_of_the_jobs_projection(
    store_url: str, clock: FakeClock
) -> None:
    hg = Headgate(store_url, clock=clock, config=RuntimeConfig(lease_ttl_ms=60_000))
    release = threading.Event()
    stopped: list[bool] = []

    @hg.handler("slow")
    def slow(job: JobContext) -> str:
        release.wait(20)
        stopped.append(job.cancelled.is_set())
        return "done"

    try:
        for n in range(30):  # a log long enough to rebuild in several batches
            hg.enqueue("other", {"n": n})
        job = hg.enqueue("slow")
        hg.start(FAST, scheduler=False)
        _eventually(lambda: hg.jobs.get(job.id).state == "running", "the claim")
        store = hg._core.store
        assert isinstance(store, SqlStore)

        def look_midway(_: str, __: int, ___: int) -> None:
            pool = hg._core.pool
            assert pool is not None
            pool.check_now()  # the worker looks at its jobs with the table half built
            time.sleep(0.3)
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            rebuild(store, batch_size=10, on_progress=look_midway)
        rebuild(store, batch_size=10)
        running = hg.jobs.get(job.id)
        assert running.state == "running"
        release.set()
        _eventually(lambda: hg.jobs.get(job.id).state == "completed", "the job's end")
        assert hg.jobs.get(job.id).result == "done" and stopped == [False]
        assert [a.outcome for a in hg.jobs.get(job.id).attempt_history] == ["succeeded"]
    finally:
        release.set()
        hg.close()
