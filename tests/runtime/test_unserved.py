"""Jobs no live worker can run, with a fake clock: named where an operator looks
(`unserved`, `waiting_for`), warned of once at enqueue (a store shared by two
Headgates: SQLite and PostgreSQL; a memory store is one process's own). Where
such a job goes is its handler's declaration's: `test_routing.py`."""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import generate_latest
from structlog.testing import capture_logs

from headgate import Headgate, UnservedWork, WorkerConfig
from headgate._unserved import REFRESH_MS
from headgate.testing import FakeClock
from tests.conftest import AND_MEMORY


def _worker(make_headgate: Callable[..., Headgate], kind: str, queue: str) -> Headgate:
    """A process that runs `kind` on `queue` (its workers started, beating)."""
    other = make_headgate()
    other.handler(kind, queue=queue)(lambda job: time.sleep(0))
    other.start(WorkerConfig(queues={queue: 1}), scheduler=False)
    deadline = time.monotonic() + 10
    while not _beating(other, queue) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _beating(other, queue), "the worker never beat"
    return other


def _beating(hg: Headgate, queue: str) -> bool:
    return any(queue in worker.queues for worker in hg.runtime.workers())


@AND_MEMORY
def test_with_no_worker_every_pending_job_is_unserved(hg: Headgate) -> None:
    with capture_logs() as logs:
        job = hg.enqueue("report.build")
        hg.enqueue("report.build")
    assert job.queue == "default"
    assert hg.runtime.unserved() == [
        UnservedWork("default", "report.build", 2, "no worker is running")
    ]
    assert hg.jobs.get(job.id).waiting_for == ("no worker is running",)
    metrics = generate_latest(hg.metrics.registry).decode()
    assert 'headgate_jobs_unserved{kind="report.build",queue="default"} 2.0' in metrics
    warned = [entry for entry in logs if entry["event"].startswith("job enqueued that no live")]
    assert len(warned) == 1, "once per queue and kind"
    assert (warned[0]["kind"], warned[0]["queue"], warned[0]["job_id"]) == (
        "report.build",
        "default",
        job.id,
    )


def test_a_job_astray_of_its_workers_queue_says_where_they_run_it(
    hg: Headgate, make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    _worker(make_headgate, "report.build", "reports")
    clock.advance(REFRESH_MS)
    job = hg.enqueue("report.build")
    assert job.queue == "reports", "its handler's declared queue"
    assert hg.jobs.get(job.id).waiting_for == ()
    astray = hg.enqueue("report.build", queue="default")
    assert hg.jobs.get(astray.id).waiting_for == (
        "no live worker runs kind report.build on queue default (workers run it on reports)",
    )
    nobody = hg.enqueue("mail.send")
    assert [(w.queue, w.kind, w.pending) for w in hg.runtime.unserved()] == [
        ("default", "mail.send", 1),
        ("default", "report.build", 1),
    ]
    assert hg.jobs.get(nobody.id).waiting_for == (
        "no live worker runs kind mail.send on queue default",
    )
