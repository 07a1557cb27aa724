"""A failed attempt keeps its traceback: where the handler's code raised, through
its nested calls, is in the job's history (Python, the API, the console, the
CLI) and in the worker's log line, for handlers run on threads and in child
processes, on every backend. A timed-out handler's record says where it was at
its deadline. The host can redact both the error's text and its traceback, and
a host that keeps texts out of the store keeps the frames alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from structlog.testing import capture_logs

from headgate import Headgate, JobContext, WorkerConfig
from headgate.cli import main
from headgate.web import create_app
from tests.conftest import AND_MEMORY
from tests.web.conftest import LOCAL

IN_A_CHILD = pytest.param("process", marks=pytest.mark.processes)


def _parse_row(row: dict[str, object]) -> None:
    raise ValueError(f"row {row['n']} has no amount (api_key={row['key']})")


def import_rows(job: JobContext) -> None:
    """Raises two calls down, in a module-level function a child process can run."""
    _parse_row(job.payload)  # type: ignore[arg-type]


def _failed_attempt(hg: Headgate, executor: str) -> str:
    hg.handler("rows.import", executor=executor, max_attempts=1)(import_rows)  # type: ignore[arg-type]
    job = hg.enqueue("rows.import", {"n": 7, "key": "s3cr3t"})
    hg.drain(timeout=30)
    return job.id


@AND_MEMORY
@pytest.mark.parametrize("executor", ["thread", IN_A_CHILD])
def test_a_failed_attempts_traceback_reaches_every_surface(
    store_url: str, executor: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Headgate(store_url) as hg, capture_logs() as logs:
        job_id = _failed_attempt(hg, executor)
        [attempt] = hg.jobs.get(job_id).attempt_history
        assert attempt.outcome == "failed"
        trace = attempt.traceback
        assert trace is not None
        assert trace.startswith("Traceback (most recent call last):\n")
        assert "in import_rows\n    _parse_row(job.payload)  # type: ignore[arg-type]" in trace
        assert "in _parse_row\n    raise ValueError(" in trace
        assert trace.rstrip().endswith("ValueError: row 7 has no amount (api_key=s3cr3t)")
        assert __file__ in trace

        client = TestClient(create_app(hg, api_token=""), base_url=LOCAL)
        api = client.get(f"/api/v1/jobs/{job_id}").json()
        assert api["attempt_history"][0]["traceback"] == trace
        assert api["attempt_history"][0]["duration_ms"] >= 0
        page = client.get(f"/jobs/{job_id}").text
        assert '<details class="traceback"><summary>Traceback</summary>' in page
        assert "in _parse_row" in page

        if store_url != "memory://":
            assert main(["jobs", "show", job_id, "--db", store_url]) == 0
            shown = capsys.readouterr().out
            assert "traceback of attempt 1 (the newest failure):\n  Traceback" in shown
            assert "  ValueError: row 7 has no amount (api_key=s3cr3t)" in shown

    [failed] = [line for line in logs if line["event"].startswith("job failed")]
    assert failed["log_level"] == "error"
    assert (failed["job_id"], failed["kind"], failed["attempt"]) == (job_id, "rows.import", 1)
    assert failed["error_type"] == "ValueError"
    assert "in _parse_row" in failed["traceback"]
    assert "payload" not in failed


def test_a_host_that_keeps_texts_out_of_the_store_keeps_the_frames(store_url: str) -> None:
    with Headgate(store_url) as hg:
        hg.handler("rows.import", max_attempts=1)(import_rows)
        job = hg.enqueue("rows.import", {"n": 7, "key": "s3cr3t"})
        hg.start(WorkerConfig(store_error_messages=False, poll_interval_ms=20), scheduler=False)
        [attempt] = _eventually_ended(hg, job.id)
    assert attempt.error_message is None
    assert attempt.traceback is not None
    assert "in _parse_row" in attempt.traceback
    assert "s3cr3t" not in attempt.traceback
    assert attempt.traceback.rstrip().endswith("builtins.ValueError")


@pytest.mark.parametrize("executor", ["thread", IN_A_CHILD])
def test_the_hosts_redaction_applies_to_the_text_and_the_traceback(
    store_url: str, executor: str
) -> None:
    redacted: Callable[[str], str] = lambda text: text.replace("s3cr3t", "[redacted]")  # noqa: E731
    with Headgate(store_url, redact_errors=redacted) as hg, capture_logs() as logs:
        job_id = _failed_attempt(hg, executor)
        [attempt] = hg.jobs.get(job_id).attempt_history
    assert attempt.error_message is not None and attempt.traceback is not None
    assert "api_key=[redacted]" in attempt.error_message
    assert "api_key=[redacted]" in attempt.traceback
    assert "s3cr3t" not in str(logs)


def test_a_timed_out_handlers_record_says_where_it_was(store_url: str) -> None:
    with Headgate(store_url) as hg:

        @hg.handler("slow", timeout_s=1, max_attempts=1)
        def slow(job: JobContext) -> None:
            _wait_for_upstream(job)

        job = hg.enqueue("slow")
        hg.start(WorkerConfig(poll_interval_ms=20), scheduler=False)
        [attempt] = _eventually_ended(hg, job.id)
    assert attempt.outcome == "timed_out"
    assert attempt.traceback is not None
    assert attempt.traceback.startswith("The handler was here when its timeout passed:")
    assert "in slow\n" in attempt.traceback
    assert "in _wait_for_upstream\n    job.cancelled.wait(5)" in attempt.traceback


def _wait_for_upstream(job: JobContext) -> None:
    job.cancelled.wait(5)


def _eventually_ended(hg: Headgate, job_id: str) -> list[object]:
    deadline = time.monotonic() + 20
    while not hg.jobs.get(job_id).attempt_history:
        assert time.monotonic() < deadline, hg.jobs.get(job_id).state
        time.sleep(0.02)
    return list(hg.jobs.get(job_id).attempt_history)
