"""Operating jobs over HTTP, on SQLite and PostgreSQL: listing and inspecting jobs,
cancel and retry, live workers and the scheduler lease, quarantine, and pausing
and resuming schedules."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient

from headgate import Headgate, JobContext, WorkerConfig
from headgate.testing import FakeClock
from tests.web.conftest import START_MS

MINUTE = 60_000


def _fail(hg: Headgate) -> None:
    @hg.handler("report.build", max_attempts=2)
    def build(job: JobContext) -> None:
        raise RuntimeError(f"disk full on attempt {job.attempt}")


def test_jobs_list_newest_first_filtered_in_bounded_pages(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    made = []
    for n in range(5):
        made.append(hg.enqueue("email.send" if n % 2 else "report.build", {"n": n}).id)
        clock.advance(1)
    first = client.get("/api/v1/jobs?limit=2").json()
    assert [job["id"] for job in first["jobs"]] == made[::-1][:2]
    rest = client.get(f"/api/v1/jobs?limit=10&cursor={first['next_cursor']}").json()
    assert [job["id"] for job in rest["jobs"]] == made[::-1][2:]
    assert rest["next_cursor"] is None
    emails = client.get("/api/v1/jobs?kind=email.send").json()["jobs"]
    assert [job["id"] for job in emails] == [made[3], made[1]]
    assert client.get("/api/v1/jobs?state=completed").json()["jobs"] == []
    assert len(client.get("/api/v1/jobs?state=pending&queue=default").json()["jobs"]) == 5
    assert client.get("/api/v1/jobs?queue=other").json()["jobs"] == []


def test_a_bad_filter_is_a_422_naming_the_field(client: TestClient) -> None:
    response = client.get("/api/v1/jobs?state=done")
    assert response.status_code == 422
    assert response.json()["error"].startswith("state:")
    limit = client.get("/api/v1/jobs?limit=0")
    assert limit.status_code == 422 and limit.json()["error"].startswith("limit:")


def test_a_failed_job_shows_its_attempts_and_errors_and_retry_runs_it_again(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    _fail(hg)
    job_id = hg.enqueue("report.build", {"day": 1}).id
    for _ in range(2):
        hg.drain()
        clock.advance(10 * MINUTE)  # past the retry's backoff
        hg.drain()
    shown = client.get(f"/api/v1/jobs/{job_id}").json()
    assert (shown["state"], shown["attempts"], shown["max_attempts"]) == ("failed", 2, 2)
    assert shown["error_type"] == "RuntimeError"
    assert shown["error_message"] == "disk full on attempt 2"
    assert [(a["attempt"], a["outcome"], a["error_message"]) for a in shown["attempt_history"]] == [
        (2, "failed", "disk full on attempt 2"),
        (1, "failed", "disk full on attempt 1"),
    ]
    failed = client.get("/api/v1/jobs?state=failed").json()["jobs"]
    assert [job["id"] for job in failed] == [job_id]

    retried = client.post(f"/api/v1/jobs/{job_id}/retry")
    assert retried.status_code == 200
    assert (retried.json()["state"], retried.json()["attempts"]) == ("pending", 0)
    again = client.post(f"/api/v1/jobs/{job_id}/retry")
    assert again.status_code == 409
    assert "pending" in again.json()["error"]
    hg.drain()
    assert client.get(f"/api/v1/jobs/{job_id}").json()["attempts"] == 1


def test_cancel_a_pending_job_then_cancel_again_is_a_409(client: TestClient, hg: Headgate) -> None:
    job_id = hg.enqueue("report.build").id
    cancelled = client.post(f"/api/v1/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    twice = client.post(f"/api/v1/jobs/{job_id}/cancel")
    assert twice.status_code == 409
    assert "cancelled" in twice.json()["error"]
    assert client.post("/api/v1/jobs/nope/cancel").status_code == 404
    assert client.post("/api/v1/jobs/nope/retry").status_code == 404


def test_workers_show_who_runs_what_and_the_scheduler_holder(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    started, release = threading.Event(), threading.Event()

    @hg.handler("report.build", queue="reports")
    def build(job: JobContext) -> None:
        started.set()
        release.wait(10)

    assert client.get("/api/v1/workers").json() == {"workers": [], "scheduler": None}
    hg.start(WorkerConfig(queues={"reports": 3}, poll_interval_ms=20))
    try:
        job_id = hg.enqueue("report.build", queue="reports").id
        assert started.wait(10)
        clock.advance(1_500)
        body = client.get("/api/v1/workers").json()
        [worker] = body["workers"]
        assert worker["queues"] == {"reports": 3}
        assert worker["running_job_ids"] == [job_id]
        assert worker["kinds"] == ["report.build"]
        assert worker["heartbeat_age_ms"] >= 1_500
        assert body["scheduler"] is not None and body["scheduler"]["term"] >= 1
        assert body["scheduler"]["holder"].startswith(body["scheduler"]["host"])
    finally:
        release.set()
        hg.stop()
    assert client.get("/api/v1/workers").json()["workers"] == []


def test_quarantine_by_hand_lists_why_and_when_and_release_clears_it(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    fingerprint = hg.quarantine.fingerprint("report.build", {"team": 7})
    put = client.put(f"/api/v1/quarantine/{fingerprint}", json={"note": "payload crashes the DB"})
    assert put.status_code == 200
    assert put.json() == {
        "fingerprint": fingerprint,
        "note": "payload crashes the DB",
        "quarantined_at_ms": START_MS,
        "kind": None,
        "sample_job_id": None,
    }
    assert client.get("/api/v1/quarantine").json() == {"entries": [put.json()], "next_cursor": None}
    refused = client.post("/api/v1/jobs", json={"kind": "report.build", "payload": {"team": 7}})
    assert refused.status_code == 409 and "quarantine" in refused.json()["error"]

    assert client.delete(f"/api/v1/quarantine/{fingerprint}").status_code == 204
    assert client.get("/api/v1/quarantine").json()["entries"] == []
    gone = client.delete(f"/api/v1/quarantine/{fingerprint}")
    assert gone.status_code == 404 and "not quarantined" in gone.json()["error"]
    admitted = client.post("/api/v1/jobs", json={"kind": "report.build", "payload": {"team": 7}})
    assert admitted.status_code == 201


def test_a_bad_quarantine_note_is_a_422_and_stores_nothing(
    client: TestClient, hg: Headgate
) -> None:
    fingerprint = hg.quarantine.fingerprint("k")
    response = client.put(f"/api/v1/quarantine/{fingerprint}", json={"note": 5})
    assert response.status_code == 422 and response.json()["error"].startswith("note")
    too_long = client.put(f"/api/v1/quarantine/{fingerprint}", json={"note": "x" * 10_000})
    assert too_long.status_code == 422 and "note" in too_long.json()["error"]
    assert client.get("/api/v1/quarantine").json()["entries"] == []


def test_pause_and_resume_are_idempotent_and_resume_follows_the_missed_run_policy(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put(
        "pulse", spec="@every:60000", kind="report.build", on_missed="backfill", backfill_max=2
    )
    hg.start(workers=False)
    try:
        for _ in range(2):
            paused = client.post("/api/v1/periodic/pulse/pause")
            assert paused.status_code == 200 and paused.json()["paused"] is True
        clock.advance(5 * MINUTE)
        hg.fire_due_ticks()
        assert hg.jobs.list(schedule_id="pulse").jobs == []
        for _ in range(2):
            resumed = client.post("/api/v1/periodic/pulse/resume")
            assert resumed.status_code == 200 and resumed.json()["paused"] is False
        deadline = time.monotonic() + 10
        while len(hg.jobs.list(schedule_id="pulse").jobs) < 2 and time.monotonic() < deadline:
            hg.fire_due_ticks()
        ticks = sorted(
            job.periodic_origin.tick_ms
            for job in hg.jobs.list(schedule_id="pulse").jobs
            if job.periodic_origin is not None
        )
        assert ticks == [START_MS + 4 * MINUTE, START_MS + 5 * MINUTE]  # backfill, limit 2
    finally:
        hg.stop()
    assert client.post("/api/v1/periodic/nope/pause").status_code == 404


@pytest.mark.parametrize("route", ["pause", "resume"])
def test_pausing_an_unknown_schedule_is_a_404(client: TestClient, route: str) -> None:
    response = client.post(f"/api/v1/periodic/missing/{route}")
    assert response.status_code == 404 and response.json() == {"error": "no schedule 'missing'"}


def test_a_schedules_manual_runs_are_listed_apart_from_its_ticks_and_link_back(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("pulse", spec="@every:60000", kind="report.build")
    hg.start(workers=False)
    try:
        clock.advance(MINUTE)
        hg.fire_due_ticks()
    finally:
        hg.stop()
    runs = []
    for key in ("first", "second"):
        runs.append(client.post("/api/v1/periodic/pulse/run", headers={"Idempotency-Key": key}))
        clock.advance(1)
    ids = [run.json()["id"] for run in runs]
    job = client.get(f"/api/v1/jobs/{ids[0]}").json()
    assert (job["run_now_schedule_id"], job["periodic_origin"]) == ("pulse", None)
    listed = client.get("/api/v1/periodic/pulse/manual-runs?limit=1").json()
    assert [j["id"] for j in listed["jobs"]] == [ids[1]]
    rest = client.get(f"/api/v1/periodic/pulse/manual-runs?cursor={listed['next_cursor']}")
    assert [j["id"] for j in rest.json()["jobs"]] == [ids[0]]
    made = client.get("/api/v1/jobs?schedule_id=pulse").json()["jobs"]  # ticks' and manual
    assert [j["id"] for j in made[:2]] == ids[::-1]
    [tick_job] = made[2:]
    assert tick_job["run_now_schedule_id"] is None and tick_job["periodic_origin"] is not None

    assert client.delete("/api/v1/periodic/pulse").status_code == 204
    after = client.get("/api/v1/periodic/pulse/manual-runs").json()["jobs"]
    assert [j["id"] for j in after] == ids[::-1]
    assert client.get("/api/v1/periodic/other/manual-runs").json()["jobs"] == []


def test_a_paused_queue_runs_nothing_until_resumed_and_says_so_everywhere(
    client: TestClient, hg: Headgate
) -> None:
    ran: list[str] = []

    @hg.handler("report.build", queue="reports")
    def build(job: JobContext) -> None:
        ran.append(job.queue)

    @hg.handler("mail.send")
    def send(job: JobContext) -> None:
        ran.append(job.queue)

    paused = client.post("/api/v1/queues/reports/pause", json={"note": "warehouse migration"})
    assert paused.status_code == 200, paused.text
    assert paused.json() == {
        "name": "reports",
        "paused": True,
        "pending": 0,
        "running": 0,
        "paused_at_ms": START_MS,
        "note": "warehouse migration",
    }
    hg.enqueue("report.build")
    hg.enqueue("mail.send")
    assert hg.drain().succeeded == 1
    assert ran == ["default"]
    listed = {q["name"]: q for q in client.get("/api/v1/queues").json()["queues"]}
    assert (listed["reports"]["paused"], listed["reports"]["pending"]) == (True, 1)
    assert (listed["default"]["paused"], listed["default"]["pending"]) == (False, 0)
    metrics = client.get("/metrics").text
    assert 'headgate_queue_paused{queue="reports"} 1.0' in metrics
    assert 'headgate_queue_paused{queue="default"} 0.0' in metrics

    again = client.post("/api/v1/queues/reports/pause")
    assert again.status_code == 200 and again.json()["paused"] is True
    resumed = client.post("/api/v1/queues/reports/resume")
    assert resumed.status_code == 200 and resumed.json()["paused"] is False
    assert hg.drain().succeeded == 1
    assert ran == ["default", "reports"]
    assert client.post("/api/v1/queues/reports/resume").json()["paused"] is False


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/queues/bad%20name/pause", {}, "queue"),
        ("/api/v1/queues/reports/pause", {"note": 5}, "note"),
        ("/api/v1/queues/reports/pause", {"note": "x" * 256}, "note"),
        ("/api/v1/queues/reports/pause", {"notes": "typo"}, "notes"),
        ("/api/v1/queues/bad%20name/resume", None, "queue"),
    ],
)
def test_a_bad_pause_or_resume_is_a_422_naming_the_field_and_stores_nothing(
    client: TestClient, hg: Headgate, path: str, body: object, field: str
) -> None:
    response = client.post(path, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"].startswith(field), response.json()
    assert all(not queue.paused for queue in hg.queues.list())


def test_limits_are_set_listed_and_cleared_and_a_held_job_says_why(
    client: TestClient, hg: Headgate
) -> None:
    hg.handler("report.build", queue="reports")(lambda job: None)
    body = {"queue": "reports", "partition_key": "*", "limit": 0}
    response = client.put("/api/v1/limits", json=body)
    assert response.status_code == 200, response.text
    assert response.json() == {
        "queue": "reports",
        "kind": None,
        "partition_key": "*",
        "limit": 0,
        "running": 0,
        "set_at_ms": START_MS,
        "running_by_partition": [],
    }
    job = hg.enqueue("report.build", partition_key="tenant-7")
    assert hg.drain().ran == 0
    shown = client.get(f"/api/v1/jobs/{job.id}").json()
    assert shown["partition_key"] == "tenant-7"
    assert shown["waiting_for"] == [
        "concurrency limit 0 on queue=reports kind=* partition=* (partition tenant-7)"
    ]
    assert [limit["limit"] for limit in client.get("/api/v1/limits").json()["limits"]] == [0]
    metrics = client.get("/metrics").text
    assert 'headgate_concurrency_limit{scope="queue=reports kind=* partition=*"} 0.0' in metrics
    assert 'headgate_concurrency_limit_running{scope="queue=reports kind=* partition=*"} 0.0' in (
        metrics
    )
    cleared = client.delete("/api/v1/limits", params={"queue": "reports", "partition_key": "*"})
    assert cleared.status_code == 204
    assert client.delete("/api/v1/limits", params={"queue": "reports"}).status_code == 404
    assert hg.drain().succeeded == 1


def test_rate_limits_are_set_listed_and_cleared(client: TestClient, hg: Headgate) -> None:
    response = client.put("/api/v1/rate-limits/mail-api", json={"limit": 30, "per_ms": 60_000})
    assert response.status_code == 200, response.text
    assert response.json() == {
        "rate_class": "mail-api",
        "limit": 30,
        "per_ms": 60_000,
        "started": 0,
        "set_at_ms": START_MS,
    }
    listed = client.get("/api/v1/rate-limits").json()["rate_limits"]
    assert [rate["rate_class"] for rate in listed] == ["mail-api"]
    metrics = client.get("/metrics").text
    assert 'headgate_rate_limit{rate_class="mail-api"} 30.0' in metrics
    assert 'headgate_rate_limit_started{rate_class="mail-api"} 0.0' in metrics
    assert client.delete("/api/v1/rate-limits/mail-api").status_code == 204
    assert client.delete("/api/v1/rate-limits/mail-api").status_code == 404
    assert hg.rates.list() == []


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("PUT", "/api/v1/limits", {"queue": "reports", "limit": -1}, "limit"),
        ("PUT", "/api/v1/limits", {"queue": "reports", "limit": "2"}, "limit"),
        ("PUT", "/api/v1/limits", {"queue": "bad name", "limit": 2}, "queue"),
        ("PUT", "/api/v1/limits", {"partition_key": "a b", "limit": 2}, "partition_key"),
        ("PUT", "/api/v1/limits", {"queue": "reports", "limit": 2, "limt": 3}, "limt"),
        ("PUT", "/api/v1/limits", {"queue": "reports"}, "limit"),
        ("PUT", "/api/v1/rate-limits/mail", {"limit": 0, "per_ms": 1_000}, "limit"),
        ("PUT", "/api/v1/rate-limits/mail", {"limit": 1, "per_ms": 0}, "per_ms"),
        ("PUT", "/api/v1/rate-limits/bad%20class", {"limit": 1, "per_ms": 1_000}, "rate_class"),
        ("DELETE", "/api/v1/rate-limits/bad%20class", None, "rate_class"),
        ("DELETE", "/api/v1/limits?queue=bad%20name", None, "queue"),
    ],
)
def test_a_bad_limit_is_a_422_naming_the_field_and_stores_nothing(  # noqa: PLR0917 (parameters)
    client: TestClient, hg: Headgate, method: str, path: str, body: object, field: str
) -> None:
    response = client.request(method, path, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"].startswith(field), response.json()
    assert hg.limits.list() == [] and hg.rates.list() == []


def test_pending_jobs_no_worker_runs_are_listed(client: TestClient, hg: Headgate) -> None:
    assert client.get("/api/v1/unserved").json() == {"unserved": [], "more": 0}
    job = hg.enqueue("report.build", queue="reports")
    assert client.get("/api/v1/unserved").json() == {
        "unserved": [
            {
                "queue": "reports",
                "kind": "report.build",
                "pending": 1,
                "reason": "no worker is running",
            }
        ],
        "more": 0,
    }
    assert client.get(f"/api/v1/jobs/{job.id}").json()["waiting_for"] == ["no worker is running"]


def test_a_query_parameter_given_twice_is_refused(client: TestClient) -> None:
    response = client.get("/api/v1/activity?since_ms=1&since_ms=2")
    assert response.status_code == 422
    assert response.json() == {"error": "since_ms: is given more than once"}
    assert client.get("/api/v1/jobs?limit=5&limit=6").status_code == 422
