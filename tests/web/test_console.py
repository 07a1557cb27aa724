"""The console's server-rendered pages, on SQLite and PostgreSQL: jobs and their
filters, a job's attempts and actions, workers, quarantine and its banner, a
schedule's payload, pauses, gaps in its history, and a deleted schedule's page."""

from __future__ import annotations

import json
import re
import threading
from html import unescape

import pytest
from fastapi.testclient import TestClient

from headgate import Headgate, JobContext, WorkerConfig
from headgate.testing import FakeClock, roll_up_activity
from headgate.web._console import format_ms
from tests.web.conftest import START_MS

MINUTE = 60_000


def _html(client: TestClient, path: str, status: int = 200) -> str:
    response = client.get(path)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("text/html")
    return response.text


def _rows(html: str, table_id: str) -> list[str]:
    body = html.split(f'<table id="{table_id}">', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr\b.*?</tr>", body.split("<tbody>", 1)[1], re.S)


def _text(html: str) -> str:
    """What a reader sees of some markup: its words, entities decoded."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _fail(hg: Headgate) -> None:
    @hg.handler("report.build", max_attempts=2)
    def build(job: JobContext) -> None:
        raise RuntimeError(f"disk full on attempt {job.attempt}")


@pytest.mark.parametrize("path", ["/", "/jobs", "/workers", "/quarantine", "/schedules/new"])
def test_every_page_renders_with_the_nav_on_an_empty_store(client: TestClient, path: str) -> None:
    html = _html(client, path)
    for link in ("/jobs", "/workers", "/quarantine"):
        assert f'href="{link}"' in html


def test_jobs_filter_by_state_queue_kind_and_schedule_and_page_with_the_filters_kept(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    made = []
    for n in range(55):
        made.append(hg.enqueue("email.send", {"n": n}).id)
        clock.advance(1)
    hg.enqueue("report.build", queue="reports")
    cancelled = hg.jobs.cancel(hg.enqueue("report.build").id)

    everything = _html(client, "/jobs")
    assert len(_rows(everything, "jobs")) == 50
    assert f'href="/jobs/{cancelled.id}"' in everything
    assert '<span class="state cancelled">cancelled</span>' in everything
    assert '<span class="state pending">pending</span>' in everything

    emails = _html(client, "/jobs?kind=email.send&state=pending")
    assert len(_rows(emails, "jobs")) == 50
    assert (
        'id="tab-pending" aria-current="page">pending <span class="count" id="count-pending">55<'
        in emails
    )
    next_href = re.search(r'id="next-page" href="([^"]+)"', emails)
    assert next_href is not None
    following = _html(client, next_href.group(1).replace("&amp;", "&"))
    assert "kind=email.send" in next_href.group(1) and "state=pending" in next_href.group(1)
    assert [made[4], made[0]] == [
        re.search(r'href="/jobs/([^"]+)"', row).group(1)  # type: ignore[union-attr]
        for row in (_rows(following, "jobs")[0], _rows(following, "jobs")[-1])
    ]
    assert 'id="next-page"' not in following

    assert len(_rows(_html(client, "/jobs?queue=reports"), "jobs")) == 1
    assert len(_rows(_html(client, "/jobs?state=cancelled"), "jobs")) == 1
    assert "No jobs match these filters" in _html(client, "/jobs?schedule_id=nightly")
    assert "No jobs match these filters" in _html(client, "/jobs?kind=%00%F0%9F%92%A5")


def test_a_schedules_jobs_are_listed_under_it(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("pulse", spec="@every:60000", kind="ping")
    hg.start(workers=False)
    try:
        clock.advance(MINUTE)
        assert hg.fire_due_ticks()
    finally:
        hg.stop()
    hg.enqueue("ping")
    [row] = _rows(_html(client, "/jobs?schedule_id=pulse"), "jobs")
    assert 'href="/schedules/pulse"' in row


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("state=done", "state: must be one of pending, running, completed"),
        ("cursor=garbage", "cursor: is not a cursor"),
    ],
)
def test_a_bad_filter_or_cursor_is_a_422_page_that_says_so(
    client: TestClient, query: str, said: str
) -> None:
    html = _html(client, f"/jobs?{query}", 422)
    problem = re.search(r'<p id="problem"[^>]*>(.*?)</p>', html, re.S)
    assert problem is not None and said in problem.group(1)
    assert 'id="job-filters"' in html, "the filters stay on the page, to correct"


@pytest.mark.parametrize("path", ["/quarantine", "/"])
def test_other_lists_explain_a_bad_cursor(client: TestClient, path: str) -> None:
    html = _html(client, f"{path}?cursor=garbage", 422)
    assert "Bad request" in html and "cursor" in html


def test_a_failed_job_shows_its_attempts_errors_and_a_retry_button(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    _fail(hg)
    job_id = hg.enqueue("report.build", {"day": 1}).id
    for _ in range(2):
        hg.drain()
        clock.advance(10 * MINUTE)
    html = _html(client, f"/jobs/{job_id}")
    assert '<span class="state failed">failed</span>' in html
    attempts_fact = re.search(r'<dd id="attempts">(.*?)</dd>', html, re.S)
    assert attempts_fact is not None
    assert _text(attempts_fact.group(1)) == "2 of 2", "the limit its attempts ran under"
    assert "<code>RuntimeError</code>: disk full on attempt 2" in html
    attempts = _rows(html, "attempts-table")
    assert len(attempts) == 2
    assert "disk full on attempt 2" in attempts[0] and "disk full on attempt 1" in attempts[1]
    assert f'data-path="/jobs/{job_id}/retry"' in html
    assert "/cancel" not in html

    hg.jobs.retry(job_id)
    pending = _html(client, f"/jobs/{job_id}")
    assert f'data-path="/jobs/{job_id}/cancel"' in pending and "/retry" not in pending


def test_a_completed_job_shows_its_result_and_no_actions(client: TestClient, hg: Headgate) -> None:
    @hg.handler("sum")
    def add(job: JobContext) -> dict[str, int]:
        return {"total": 3}

    job_id = hg.enqueue("sum", {"terms": [1, 2]}).id
    hg.drain()
    html = _html(client, f"/jobs/{job_id}")
    assert '<pre id="result">{\n  &#34;total&#34;: 3\n}</pre>' in html
    assert "/retry" not in html and "/cancel" not in html
    assert '<span class="outcome succeeded">succeeded</span>' in html


def test_a_jobs_page_shows_its_fingerprint_with_quarantine_and_release(
    client: TestClient, hg: Headgate
) -> None:
    job = hg.enqueue("report.build", {"team": 7})
    fingerprint = hg.quarantine.fingerprint("report.build", {"team": 7})
    assert job.fingerprint == fingerprint
    html = _html(client, f"/jobs/{job.id}")
    facts = re.search(r'<dd id="fingerprint">(.*?)</dd>', html, re.S)
    assert facts is not None
    assert f'<code class="fingerprint">{fingerprint}</code>' in facts.group(1)
    button = re.search(r'<button id="quarantine-fingerprint"[^>]*>', facts.group(1), re.S)
    assert button is not None
    assert f'data-method="PUT" data-path="/quarantine/{fingerprint}"' in button.group(0)
    assert f'data-body="{{&#34;note&#34;: &#34;by hand, from job {job.id}&#34;}}"' in button.group(
        0
    )
    assert "release-fingerprint" not in html

    # What the button sends: the API quarantines it, and the page says so.
    put = client.put(
        f"/api/v1/quarantine/{fingerprint}", json={"note": f"by hand, from job {job.id}"}
    )
    assert put.status_code == 200
    quarantined = _html(client, f"/jobs/{job.id}")
    assert f"by hand, from job {job.id}" in quarantined
    assert 'id="fingerprint-quarantined"' in quarantined and 'href="/quarantine"' in quarantined
    assert f'data-method="DELETE" data-path="/quarantine/{fingerprint}"' in quarantined
    assert "quarantine-fingerprint" not in quarantined


def test_a_tick_job_links_to_its_schedule_and_tick(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("pulse", spec="@every:60000", kind="ping")
    hg.start(workers=False)
    try:
        clock.advance(MINUTE)
        assert hg.fire_due_ticks()
    finally:
        hg.stop()
    [job] = hg.jobs.list(schedule_id="pulse").jobs
    html = _html(client, f"/jobs/{job.id}")
    assert f'href="/schedules/pulse#tick-{START_MS + MINUTE}"' in html
    assert f'id="tick-{START_MS + MINUTE}"' in _html(client, "/schedules/pulse")


def test_workers_show_who_runs_what_and_the_scheduler_lease(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    idle = _html(client, "/workers")
    assert "No live workers." in idle and "No scheduler holds the lease" in idle
    started, release = threading.Event(), threading.Event()

    @hg.handler("report.build", queue="reports")
    def build(job: JobContext) -> None:
        started.set()
        release.wait(10)

    hg.start(WorkerConfig(queues={"reports": 3}, poll_interval_ms=20))
    try:
        job_id = hg.enqueue("report.build", queue="reports").id
        assert started.wait(10)
        clock.advance(1_500)
        html = _html(client, "/workers")
        [row] = _rows(html, "workers")
        assert "reports: 3" in row and f'href="/jobs/{job_id}"' in row
        assert '<a href="/jobs?kind=report.build"><code>report.build</code></a>' in row
        assert "1 s ago" in row
        lease = hg.runtime.lease()
        assert lease is not None
        assert f"<strong>{lease.holder}</strong>" in html and f"term {lease.term}" in html
    finally:
        release.set()
        hg.stop()


def test_a_quarantined_schedule_shows_a_banner_until_released(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("nightly", spec="@every:60000", kind="report.build", payload={"team": 7})
    fingerprint = hg.quarantine.fingerprint("report.build", {"team": 7})
    assert 'id="quarantine-banner"' not in _html(client, "/schedules/nightly")
    hg.quarantine.add(fingerprint, "payload crashes the DB")

    listed = _html(client, "/quarantine")
    [row] = _rows(listed, "quarantine")
    assert fingerprint in row and "payload crashes the DB" in row
    assert f'data-method="DELETE" data-path="/quarantine/{fingerprint}"' in row
    assert "data-confirm=" in row

    banner = re.search(
        r'id="quarantine-banner">(.*?)</p>', _html(client, "/schedules/nightly"), re.S
    )
    assert banner is not None
    assert "payload crashes the DB" in banner.group(1)
    assert "skipped</span> (quarantined)" in banner.group(1)
    assert 'href="/quarantine"' in banner.group(1)

    hg.quarantine.release(fingerprint)
    assert 'id="quarantine-banner"' not in _html(client, "/schedules/nightly")
    assert "Nothing is quarantined." in _html(client, "/quarantine")


def test_the_schedule_page_shows_the_payload_and_says_what_a_pause_means(
    client: TestClient, hg: Headgate
) -> None:
    hg.schedules.put("nightly", spec="0 9 * * *", kind="report.build", payload={"team": 7})
    html = _html(client, "/schedules/nightly")
    assert '<pre id="payload">{\n  &#34;team&#34;: 7\n}</pre>' in html
    assert 'data-path="/periodic/nightly/pause"' in html and "paused —" not in html
    assert "<th>Event</th>" not in html

    hg.schedules.pause("nightly")
    html = _html(client, "/schedules/nightly")
    next_run = re.search(r'<dd id="next-run">(.*?)</dd>', html, re.S)
    assert next_run is not None
    assert "paused — would next run at" in next_run.group(1)
    assert "2024-01-01 09:00:00 UTC" in next_run.group(1)
    assert 'data-path="/periodic/nightly/resume"' in html
    index = _html(client, "/")
    assert "paused — would next run at" in index
    assert 'data-path="/periodic/nightly/resume"' in index


def test_ticks_merged_by_the_missed_run_policy_show_as_a_gap(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("pulse", spec="@every:60000", kind="ping")
    hg.start(workers=False)
    try:
        for _ in range(2):
            clock.advance(MINUTE)
            assert hg.fire_due_ticks()
        hg.schedules.pause("pulse")
        clock.advance(10 * MINUTE)
        hg.schedules.resume("pulse")
        assert hg.fire_due_ticks()
    finally:
        hg.stop()
    rows = _rows(_html(client, "/schedules/pulse"), "events")
    assert len(rows) == 4, [" ".join(re.sub("<[^>]+>", " ", row).split()) for row in rows]
    assert 'class="gap"' in rows[1]
    assert (
        "No attempts between 2024-01-01 00:02:00 UTC and 2024-01-01 00:12:00 UTC:"
        " 9 ticks missed" in " ".join(rows[1].split())
    )
    assert all('class="gap"' not in row for row in (rows[0], rows[2], rows[3]))


def test_a_deleted_schedule_keeps_a_read_only_page_with_its_history(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    hg.schedules.put("pulse", spec="@every:60000", kind="ping", payload={"a": 1})
    hg.start(workers=False)
    try:
        clock.advance(MINUTE)
        assert hg.fire_due_ticks()
    finally:
        hg.stop()
    hg.schedules.delete("pulse")
    html = _html(client, "/schedules/pulse")
    assert 'id="deleted-banner"' in html and '<span class="badge deleted">deleted</span>' in html
    [row] = _rows(html, "events")
    assert "2024-01-01 00:01:00 UTC" in row and "enqueued" in row
    assert "@every:60000" in html and "&#34;a&#34;: 1" in html
    for action in ('id="enqueue-now"', 'id="delete"', "/edit", "data-path", "auto-refresh"):
        assert action not in html
    assert "pulse" not in _html(client, "/")
    assert "There is no schedule nope" in _html(client, "/schedules/nope", 404)
    assert _html(client, "/schedules/pulse/edit", 404)


def test_the_edit_form_shows_the_id_as_text_offers_cancel_and_n_only_for_backfill(
    client: TestClient, hg: Headgate
) -> None:
    hg.schedules.put("nightly", spec="0 9 * * *", kind="report.build")
    edit = _html(client, "/schedules/nightly/edit")
    assert '<code id="schedule-id">nightly</code>' in edit
    assert '<input type="hidden" name="id" value="nightly">' in edit
    assert re.search(r'<input name="id"', edit) is None
    assert '<a id="cancel" href="/schedules/nightly">Cancel</a>' in edit
    assert '<label id="backfill-field" hidden>' in edit

    hg.schedules.put("nightly", spec="0 9 * * *", kind="report.build", on_missed="backfill")
    assert '<label id="backfill-field">' in _html(client, "/schedules/nightly/edit")
    new = _html(client, "/schedules/new")
    assert '<input name="id" required' in new and '<a id="cancel" href="/">Cancel</a>' in new
    assert '<label id="backfill-field" hidden>' in new


def test_manual_runs_are_runs_marked_as_such_and_link_back_after_a_delete(
    client: TestClient, hg: Headgate
) -> None:
    hg.schedules.put("pulse", spec="@every:60000", kind="ping")
    job_id, _ = hg.schedules.enqueue_now("pulse", "click-1")
    html = _html(client, "/schedules/pulse")
    [manual] = _rows(html, "runs")
    assert f'href="/jobs/{job_id}"' in manual and "enqueued" in manual
    assert "enqueue now" in manual
    assert "No automatic enqueue attempts yet." in html
    origin = re.search(r'<dd id="origin">(.*?)</dd>', _html(client, f"/jobs/{job_id}"), re.S)
    assert origin is not None
    assert 'Enqueue now on <a href="/schedules/pulse">pulse</a>' in origin.group(1)

    hg.schedules.delete("pulse")
    [still] = _rows(_html(client, "/schedules/pulse"), "runs")
    assert f'href="/jobs/{job_id}"' in still


def test_times_show_their_milliseconds_when_they_have_some() -> None:
    assert format_ms(1_500) == "1970-01-01 00:00:01.500 UTC"
    assert format_ms(60_000) == "1970-01-01 00:01:00 UTC"
    assert format_ms(50_400_007, "America/New_York") == "1970-01-01 09:00:00.007 EST"


def test_the_queues_page_pauses_and_resumes_through_the_api(
    client: TestClient, hg: Headgate
) -> None:
    job = hg.enqueue("report.build", queue="reports")
    assert "its queue is paused" not in _html(client, f"/jobs/{job.id}")
    html = _html(client, "/queues")
    assert 'href="/queues"' in html  # in the navigation
    [row] = _rows(html, "queues")
    assert 'data-queue="reports"' in row and "running" in _text(row)
    button = re.search(r'<button class="action danger pause"[^>]*>', row, re.S)
    assert button is not None
    assert 'data-path="/queues/reports/pause"' in button.group(0)
    assert json.loads(unescape(re.findall(r"data-body='([^']*)'", button.group(0))[0])) == {
        "note": "paused from the console"
    }

    # What the button sends: the API pauses it, and the page says so.
    paused = client.post("/api/v1/queues/reports/pause", json={"note": "paused from the console"})
    assert paused.status_code == 200
    [row] = _rows(_html(client, "/queues"), "queues")
    assert "paused" in _text(row) and "paused from the console" in _text(row)
    job_page = _text(_html(client, f"/jobs/{job.id}"))
    assert "its queue is paused: it waits until the queue is resumed" in job_page
    assert 'data-path="/queues/reports/resume"' in row
    assert client.post("/api/v1/queues/reports/resume").status_code == 200
    [row] = _rows(_html(client, "/queues"), "queues")
    assert 'data-path="/queues/reports/pause"' in row


def test_the_limits_page_shows_each_limit_and_rate_with_what_runs_and_clears_them(
    client: TestClient, hg: Headgate
) -> None:
    hg.limits.set(queue="reports", partition_key="*", limit=0)
    hg.rates.set("mail-api", limit=30, per_ms=60_000)
    job = hg.enqueue("report.build", queue="reports", partition_key="tenant-7")
    html = _html(client, "/limits")
    assert 'href="/limits"' in html  # in the navigation
    [row] = _rows(html, "limits")
    assert "each key" in _text(row) and "0 / 0 per key" in _text(row)
    assert 'data-path="/limits?queue=reports&amp;partition_key=%2A"' in row
    [rate] = _rows(html, "rate-limits")
    assert "mail-api" in _text(rate) and "0 / 30" in _text(rate)
    assert 'data-path="/rate-limits/mail-api"' in rate
    assert 'id="limit-form"' in html and 'data-path="/rate-limits/{rate_class}"' in html

    # What the buttons send: the API clears them, and the page says so.
    assert client.delete("/api/v1/limits?queue=reports&partition_key=%2A").status_code == 204
    assert client.delete("/api/v1/rate-limits/mail-api").status_code == 204
    html = _html(client, "/limits")
    assert "No concurrency limit" in html and "No rate class has a limit" in html
    assert "partition-key" in _html(client, f"/jobs/{job.id}")


def test_a_held_jobs_page_says_what_it_waits_for(client: TestClient, hg: Headgate) -> None:
    hg.limits.set(kind="report.build", limit=0)
    job = hg.enqueue("report.build", partition_key="tenant-7", rate_class="pdf")
    page = _html(client, f"/jobs/{job.id}")
    assert 'id="waiting-for"' in page
    assert "concurrency limit 0 on queue=* kind=report.build partition=*any" in _text(page)
    assert "tenant-7" in _text(page) and 'id="rate-class"' in page


def test_the_overview_draws_each_chart_from_the_roll_up(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    assert 'id="no-activity"' in _html(client, "/overview")
    hg.handler("report.build")(lambda job: None)
    for _ in range(3):
        hg.enqueue("report.build")
        hg.drain()
        clock.advance(60_000)
        roll_up_activity(hg)
    hg.enqueue("report.build", queue="reports")  # waits: nobody serves it
    clock.advance(60_000)
    roll_up_activity(hg)
    html = _html(client, "/overview")
    assert 'href="/overview"' in html  # in the navigation
    assert 'id="no-activity"' not in html
    jobs = re.search(r'<figure class="chart" id="chart-jobs".*?</figure>', html, re.S)
    assert jobs is not None
    lines = re.findall(
        r'<polyline class="series s\d[^"]*" fill="none" points="([^"]+)"', jobs.group(0)
    )
    assert len(lines) == 5, "started, succeeded, failed, snoozed, expired"
    assert all(len(points.split()) == 4 for points in lines), "a point per minute rolled up"
    assert "succeeded: 1" in _text(jobs.group(0)) and "top 1" in _text(jobs.group(0))
    depth = re.search(r'id="chart-queue-depth".*?</figure>', html, re.S)
    assert depth is not None and "reports: 1" in _text(depth.group(0))
    api = client.get("/api/v1/activity", params={"since_ms": 0}).json()["points"]
    assert {point["series"] for point in api} >= {"ticks", "jobs", "queue_depth"}
    assert client.get("/api/v1/activity", params={"since_ms": -1}).status_code == 422
    assert client.get("/api/v1/activity", params={"since_ms": 2**63}).status_code == 422


def test_every_page_warns_of_pending_jobs_no_worker_runs(client: TestClient, hg: Headgate) -> None:
    assert 'id="unserved-banner"' not in _html(client, "/jobs")
    job = hg.enqueue("report.build", queue="reports")
    for path in ("/overview", "/jobs", "/queues", f"/jobs/{job.id}"):
        page = _html(client, path)
        assert 'id="unserved-banner"' in page, path
        assert "1 of kind report.build on queue reports : no worker is running" in _text(page)
    assert 'href="/jobs?state=pending&amp;queue=reports&amp;kind=report.build"' in page
    assert "no worker is running" in _text(page.split('id="waiting-for"', 1)[1])
