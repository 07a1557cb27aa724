"""Routing by declaration with real processes, on SQLite and PostgreSQL: a
worker declares `queue="pdf"` and exits; a producer process without the
handler enqueues while no worker is alive; the job waits on `pdf`, and the
next worker on `pdf` runs it (it used to land on `default`, stranded)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from headgate import Headgate
from tests.web.serving import headgate_command, server_environment

pytestmark = pytest.mark.processes

APP = textwrap.dedent(
    """
    import os
    from pathlib import Path
    from headgate import Headgate, JobContext

    hg = Headgate(os.environ["STORE_URL"])

    @hg.handler("pdf.render", queue="pdf", priority=3)
    def render(job: JobContext) -> str:
        Path(job.payload["path"]).write_text(job.queue)
        return "rendered"
    """
)
PRODUCER = textwrap.dedent(
    """
    import os
    from headgate import Headgate

    with Headgate(os.environ["STORE_URL"]) as hg:
        job = hg.enqueue("pdf.render", {"path": os.environ["OUT"]})
        print(job.id, job.queue, job.priority)
    """
)


def _worker(tmp_path: Path, environment: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [headgate_command(), "worker", "--app", "pdf_app:hg"],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _until(condition: Callable[[], object], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _stop(worker: subprocess.Popen[str]) -> str:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(timeout=20)
    finally:
        if worker.poll() is None:
            worker.kill()
    return worker.stdout.read() if worker.stdout else ""


def test_a_producer_without_the_handler_routes_to_the_declared_queue_while_no_worker_lives(
    tmp_path: Path, store_url: str
) -> None:
    (tmp_path / "pdf_app.py").write_text(APP)
    out = tmp_path / "rendered.txt"
    environment = {**server_environment(), "STORE_URL": store_url, "OUT": str(out)}
    with Headgate(store_url) as client:
        first = _worker(tmp_path, environment)
        try:
            _until(client.runtime.workers, "the first worker never beat")
        finally:
            assert "Traceback" not in _stop(first)
        assert first.returncode == 0 and client.runtime.workers() == [], "no worker is alive"
        assert [(h.kind, h.queue, h.priority) for h in client.runtime.declared_handlers()] == [
            ("pdf.render", "pdf", 3)
        ]

        produced = subprocess.run(
            [sys.executable, "-c", PRODUCER],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        job_id, queue, priority = produced.stdout.split()
        assert (queue, priority) == ("pdf", "3"), "its handler's queue, not default"
        assert client.jobs.get(job_id).queue == "pdf"

        second = _worker(tmp_path, environment)
        try:
            _until(lambda: client.jobs.get(job_id).state == "completed", "the job never ran")
        finally:
            assert "Traceback" not in _stop(second)
        assert client.jobs.get(job_id).result == "rendered"
        assert out.read_text() == "pdf"
