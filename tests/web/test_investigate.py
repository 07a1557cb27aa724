"""The console made to investigate: the jobs list's tabs, search and columns,
bulk retry and cancel over a filtered selection (API, console), quarantine rows
with their kind and a job, and the navigation's marker."""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

import pytest
from fastapi.testclient import TestClient

from headgate import ActivityPoint, Headgate
from headgate._domain.activity import MINUTE_MS, SHOWN_MS
from headgate._domain.events import JobQuarantined
from headgate._domain.streams import job_stream
from headgate._projections import JobRow
from headgate._store.port import JobFilter, Page
from headgate.testing import FakeClock, finish_job, roll_up_activity
from headgate.web._charts import fitted_start, nice_top, value_label


def _failed(hg: Headgate, kind: str, n: int, **payload: Any) -> list[str]:
    made = []
    for index in range(n):
        job = hg.enqueue(kind, {"n": index, **payload})
        finish_job(hg, job.id, "failed")
        made.append(job.id)
    return made


def _rows(html: str) -> list[str]:
    body = re.search(r'<table id="jobs">.*?<tbody>(.*?)</tbody>', html, re.S)
    assert body is not None
    return [row for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body.group(1), re.S) if "href" in row]


def test_bulk_retry_takes_the_filtered_jobs_and_counts_what_it_did(
    client: TestClient, hg: Headgate
) -> None:
    mails = _failed(hg, "email.send", 3)
    reports = _failed(hg, "report.build", 2)
    counted = client.get("/api/v1/jobs:count", params={"kind": "email.send"}).json()
    assert counted["counts"]["failed"] == 3 and counted["cap"] == 10_000

    answer = client.post("/api/v1/jobs:retry", json={"state": "failed", "kind": "email.send"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["action"], body["changed"], body["skipped"], body["more"]) == (
        "retry",
        3,
        0,
        False,
    )
    assert sorted(body["job_ids"]) == sorted(mails)
    assert {hg.jobs.get(job_id).state for job_id in mails} == {"pending"}
    assert {hg.jobs.get(job_id).state for job_id in reports} == {"failed"}
    history = hg.jobs.get(mails[0]).attempt_history
    assert history[0].outcome == "retried", "each job's retry is its own event"


def test_bulk_cancel_is_bounded_and_says_more_match(client: TestClient, hg: Headgate) -> None:
    for n in range(5):
        hg.enqueue("email.send", {"n": n})
    first = client.post("/api/v1/jobs:cancel", json={"state": "pending", "limit": 2}).json()
    assert (first["changed"], first["more"]) == (2, True)
    second = client.post("/api/v1/jobs:cancel", json={"state": "pending", "limit": 3}).json()
    assert (second["changed"], second["more"]) == (3, False)
    assert hg.jobs.count()["cancelled"] == 5


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/jobs:retry", {"state": "completed"}, "state"),
        ("/api/v1/jobs:retry", {"state": "pending"}, "state"),
        ("/api/v1/jobs:cancel", {"state": "failed"}, "state"),
        ("/api/v1/jobs:retry", {}, "state"),
        ("/api/v1/jobs:retry", {"state": "failed", "limit": 1_001}, "limit"),
        ("/api/v1/jobs:retry", {"state": "failed", "everything": True}, "everything"),
    ],
)
def test_a_bulk_action_names_the_field_it_refuses(
    client: TestClient, hg: Headgate, path: str, body: dict[str, object], field: str
) -> None:
    _failed(hg, "email.send", 1)
    before = hg.jobs.count()
    answer = client.post(path, json=body)
    assert answer.status_code == 422
    assert answer.json()["error"].startswith(f"{field}: ")
    assert hg.jobs.count() == before


def test_a_job_that_changed_state_meanwhile_is_skipped_not_an_error(hg: Headgate) -> None:
    """Optimistic concurrency per job: one retried by someone else between the
    bulk's read and its write is counted as skipped; the others are retried."""
    made = _failed(hg, "email.send", 3)
    reads = hg._core.commands._reads
    real = reads.jobs_page

    def raced(where: JobFilter, limit: int, cursor: str | None) -> Page[JobRow]:
        page = real(where, limit, cursor)
        hg.jobs.retry(made[1])  # another operator, after the read
        return page

    reads.jobs_page = raced  # type: ignore[method-assign]
    try:
        result = hg.jobs.retry_many(state="failed")
    finally:
        reads.jobs_page = real  # type: ignore[method-assign]
    assert (result.changed, result.skipped) == (2, 1)
    assert made[1] not in result.job_ids
    assert [a.outcome for a in hg.jobs.get(made[1]).attempt_history].count("retried") == 1


def test_the_jobs_list_has_a_tab_per_state_with_its_count_and_bulk_actions(
    client: TestClient, hg: Headgate
) -> None:
    _failed(hg, "email.send", 2)
    hg.enqueue("email.send")
    page = client.get("/jobs", params={"kind": "email.send", "state": "failed"}).text
    tab = re.search(r'<a href="([^"]+)" id="tab-failed" aria-current="page">failed (.*?)</a>', page)
    assert tab is not None and unescape(tab.group(1)) == "/jobs?kind=email.send&state=failed"
    assert '<span class="count" id="count-failed">2</span>' in tab.group(2)
    assert '<span class="count" id="count-pending">1</span>' in page
    assert '<span class="count" id="count-all">3</span>' in page
    button = re.search(r'<button type="button" id="bulk-retry"[^>]*>', page)
    assert button is not None
    filters = re.search(r'data-filters="([^"]+)"', button.group(0))
    assert filters is not None
    assert json.loads(unescape(filters.group(1))) == {"state": "failed", "kind": "email.send"}
    assert 'id="bulk-cancel"' not in page, "a failed job cannot be cancelled"
    pending = client.get("/jobs", params={"state": "pending"}).text
    assert 'id="bulk-cancel"' in pending and 'id="bulk-retry"' not in pending
    assert 'id="bulk-' not in client.get("/jobs").text, "no bulk action without a state"


def test_the_jobs_list_searches_by_id_unique_key_and_idempotency_key(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    keyed = hg.enqueue("invoice.send", {"n": 7}, unique_key="invoice-7")
    other = hg.enqueue("invoice.send", {"n": 8})
    hg.schedules.put("nightly", spec="@every:60000", kind="report.build")
    manual = hg.schedules.enqueue_now("nightly", "operator-click-1")

    def found(**params: str) -> list[str]:
        return [
            re.search(r'title="([^"]+)"', row).group(1)  # type: ignore[union-attr]
            for row in _rows(client.get("/jobs", params=params).text)
        ]

    assert found(search="invoice-7") == [keyed.id]
    assert found(search=other.id) == [other.id]
    assert found(search="operator-click-1", schedule_id="nightly") == [manual.job_id]
    assert found(search="operator-click-1") == [], "an idempotency key is a schedule's"
    assert client.get("/api/v1/jobs", params={"search": "invoice-7"}).json()["jobs"][0]["id"] == (
        keyed.id
    )


def test_the_jobs_list_shows_duration_and_error_and_ids_that_do_not_wrap(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    @hg.handler("report.build", max_attempts=1)
    def build(_: object) -> None:
        clock.advance(1_500)
        raise KeyError("region")

    job = hg.enqueue("report.build")
    hg.drain()
    [row] = _rows(client.get("/jobs").text)
    assert '<td class="duration">1 s</td>' in row
    assert '<td class="error-type"><code title="' in row and ">KeyError</code>" in row
    assert f'<td class="id"><a href="/jobs/{job.id}"' in row
    css = client.get("/static/console.css").text
    assert "td.id, td.id code" in css and "white-space: nowrap" in css


def test_the_jobs_list_refreshes_only_with_script_and_can_be_paused(client: TestClient) -> None:
    page = client.get("/jobs").text
    control = re.search(r'<label[^>]*id="auto-refresh-control"[^>]*>', page)
    assert control is not None and " hidden" in control.group(0), "without script it is not offered"
    assert '<input type="checkbox" id="auto-refresh" checked>' in page
    assert 'id="jobs-list" data-refresh' in page and 'id="state-tabs"' in page
    assert 'name="search"' in page and '<form id="job-filters"' in page


@pytest.mark.parametrize(
    ("path", "current"),
    [
        ("/jobs", "/jobs"),
        ("/workers", "/workers"),
        ("/", "/"),
        ("/schedules/new", "/"),
        ("/quarantine", "/quarantine"),
    ],
)
def test_the_navigation_marks_the_current_section(
    client: TestClient, path: str, current: str
) -> None:
    nav = re.search(r"<nav>(.*?)</nav>", client.get(path).text, re.S)
    assert nav is not None
    assert re.findall(r'<a href="([^"]+)" aria-current="page">', nav.group(1)) == [current]


def test_a_quarantine_row_shows_its_kind_and_a_held_job(client: TestClient, hg: Headgate) -> None:
    job = hg.enqueue("report.build", {"team": 7})
    fingerprint = hg.quarantine.fingerprint("report.build", {"team": 7})
    hg.quarantine.add(fingerprint, "crashed its workers")
    hg._core.store.log.append(job_stream(job.id), 1, [JobQuarantined(job.id, fingerprint, 3)])
    by_hand = hg.quarantine.fingerprint("other.kind", None)
    hg.quarantine.add(by_hand, "by hand")

    rows = re.findall(
        r"<tr data-fingerprint=\"(\w+)\">(.*?)</tr>", client.get("/quarantine").text, re.S
    )
    shown = dict(rows)
    assert "<code>report.build</code>" in shown[fingerprint]
    assert f'href="/jobs/{job.id}"' in shown[fingerprint]
    assert "no quarantined job" in shown[by_hand]
    listed = {e["fingerprint"]: e for e in client.get("/api/v1/quarantine").json()["entries"]}
    assert (listed[fingerprint]["kind"], listed[fingerprint]["sample_job_id"]) == (
        "report.build",
        job.id,
    )
    assert listed[by_hand]["kind"] is None


@pytest.mark.parametrize(
    ("largest", "top"),
    [
        (0, 1),
        (0.4, 1),
        (1, 1),
        (3, 5),
        (7, 10),
        (11, 20),
        (240, 250),
        (1_234, 2_000),
        (60_001, 1e5),
    ],
)
def test_a_charts_scale_tops_at_a_round_number(largest: float, top: float) -> None:
    assert nice_top(largest) == top


def test_a_charts_labels_read_at_a_glance() -> None:
    assert [value_label(v) for v in (0, 2.5, 750, 1_500, 2_000_000)] == [
        "0",
        "2.5",
        "750",
        "1.5k",
        "2M",
    ]


def test_a_charts_window_starts_at_the_first_minute_rolled_up() -> None:
    end = 100 * MINUTE_MS
    day_before = end - SHOWN_MS
    points = [ActivityPoint(70 * MINUTE_MS, "jobs", "started", 1.0)]
    assert fitted_start(points, day_before, end) == 70 * MINUTE_MS
    recent = [ActivityPoint(98 * MINUTE_MS, "jobs", "started", 1.0)]
    assert fitted_start(recent, day_before, end) == 90 * MINUTE_MS, "ten minutes at least"
    assert fitted_start([], day_before, end) == 90 * MINUTE_MS


def test_the_overview_charts_have_axes_gridlines_and_say_when_empty(
    client: TestClient, hg: Headgate, clock: FakeClock
) -> None:
    hg.handler("report.build")(lambda job: None)
    for _ in range(3):
        for _ in range(7):
            hg.enqueue("report.build")
        hg.drain()
        clock.advance(60_000)
        roll_up_activity(hg)
    html = client.get("/overview").text
    jobs = re.search(r'<figure class="chart" id="chart-jobs".*?</figure>', html, re.S)
    assert jobs is not None
    assert re.findall(r'class="value-label"[^>]*>([^<]+)<', jobs.group(0)) == [
        "0",
        "2.5",
        "5",
        "7.5",
        "10",
    ], "7 a minute: a scale of round steps up to 10"
    times = re.findall(r'class="time-label"[^>]*>([^<]+)<', jobs.group(0))
    assert times and all(re.fullmatch(r"\d\d:\d\d", t) for t in times)
    assert times[0] == "23:54", "ten minutes up to now, not a day of nothing before them"
    assert jobs.group(0).count('class="gridline') >= 5 + len(times)
    limits = re.search(r'<figure class="chart empty" id="chart-limits".*?</figure>', html, re.S)
    assert limits is not None and ">No data in this span</text>" in limits.group(0)
