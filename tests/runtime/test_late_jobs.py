"""Jobs already past their start deadline take no worker's slot: they are
recorded expired in bulk before a claim, so a job behind them that can still
start in time runs at once. A one-slot worker used to claim the late jobs one
at a time, record each expired and sleep until its next poll: ten of them made
a fresh job with a 3 s deadline expire unrun after 6.5 s. On the real clock,
the jobs enqueued by another process, on each backend.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from headgate import Headgate, JobContext, RuntimeConfig, WorkerConfig

pytestmark = pytest.mark.processes

LATE = 10


@pytest.fixture
def worker(store_url: str) -> Iterator[Headgate]:
    hg = Headgate(store_url, config=RuntimeConfig(lease_ttl_ms=2_000))
    yield hg
    hg.close()


def test_late_jobs_expire_together_and_leave_the_slot_to_a_job_that_can_start(
    store_url: str, worker: Headgate
) -> None:
    subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import time
                from headgate import Headgate
                with Headgate({store_url!r}) as hg:
                    for n in range({LATE}):
                        hg.enqueue("work", {{"n": n}}, start_within_ms=100)
                """
            ),
        ],
        check=True,
    )
    time.sleep(0.3)  # each is now past its start deadline
    started: list[float] = []

    @worker.handler("work")
    def work(job: JobContext) -> None:
        started.append(time.monotonic())

    fresh = worker.enqueue("work", {"fresh": True}, start_within_ms=3_000)
    began = time.monotonic()
    worker.start(WorkerConfig(queues={"default": 1}, poll_interval_ms=1_000), scheduler=False)
    ends = began + 10
    while worker.jobs.get(fresh.id).state not in {"completed", "expired"}:
        assert time.monotonic() < ends, worker.jobs.get(fresh.id).state
        time.sleep(0.02)
    assert worker.jobs.get(fresh.id).state == "completed"
    assert len(started) == 1, "no late job ran"
    assert started[0] - began < 1.0, "the fresh job waited behind the late ones"
    late = [job for job in worker.jobs.list(kind="work", limit=50).jobs if job.id != fresh.id]
    assert [job.state for job in late] == ["expired"] * LATE
