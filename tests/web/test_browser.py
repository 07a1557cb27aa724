"""A real browser (Playwright driving Debian's Chromium) against `headgate serve`
with a host module's handlers: create a schedule through the form, watch ticks
arrive, double-click Enqueue now, pause and resume, retry a failed job, see a
quarantine banner and release it, delete, and fit every page on a phone; with a
token, log in, act and log out; and pages on another origin can neither frame
the console nor make it write. All of it under the pages' CSP, which must
refuse nothing the console itself does."""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    Route,
    ViewportSize,
    sync_playwright,
)

from headgate import Headgate
from headgate._facade.quarantine import Quarantine
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock, roll_up_activity
from tests.web.serving import free_port, serving, wait_until_answering

pytestmark = pytest.mark.processes

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOST_MODULE = """
from pathlib import Path

from headgate import Headgate, JobContext

hg = Headgate("sqlite:///headgate.db")


@hg.handler("demo.flaky", max_attempts=2)
def flaky(job: JobContext) -> dict[str, str]:
    if not Path("fixed").exists():
        raise RuntimeError(f"disk full on attempt {job.attempt}")
    return {"fixed": "yes"}


@hg.handler("demo.broken", max_attempts=1)
def broken(job: JobContext) -> None:
    if not Path("mended").exists():
        raise KeyError("region")
"""
PHONE: ViewportSize = {"width": 390, "height": 844}


def _api(base: str, method: str, path: str, body: object = None, token: str | None = None) -> Any:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        f"{base}/api/v1{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers=headers,
        method=method,
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read() or "null")


def _eventually(check: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _newest_tick(base: str, schedule_id: str) -> int | None:
    events = _api(base, "GET", f"/periodic/{schedule_id}/enqueue-events?limit=1")["events"]
    return events[0]["tick_ms"] if events else None


def _rows(page: Page, selector: str) -> int:
    return page.locator(f"#events tbody tr{selector}").count()


def _watch_for_refusals(page: Page) -> list[str]:
    """What the page's CSP refused, and its uncaught errors, as they come."""
    refused: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text or "Refused to" in message.text:
            refused.append(message.text)

    page.on("console", on_console)
    page.on("pageerror", lambda error: refused.append(f"uncaught: {error}"))
    return refused


def _fits_a_phone(browser: Browser, url: str) -> None:
    phone = browser.new_page(viewport=PHONE)
    try:
        phone.goto(url)
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{url} scrolls sideways at 390 px ({width} px wide)"
    finally:
        phone.close()


def _the_overview_draws_charts_from_the_roll_up(page: Page, tmp_path: Path, base: str) -> None:
    """The minutes the test ran in, rolled up from the store's own rows (by a
    second Headgate whose clock says they have closed), drawn on the overview."""
    now = int(time.time() * 1000)
    for closed_at in (now + 2_000, now + 62_000):  # the minute before, then this one
        with Headgate(f"sqlite:///{tmp_path / 'headgate.db'}", clock=FakeClock(closed_at)) as hg:
            roll_up_activity(hg)
    page.goto(f"{base}/overview")
    ticks = page.locator("#chart-ticks polyline.series")
    assert ticks.count() == 4, "enqueued, deduplicated, skipped, failed"
    points = ticks.first.get_attribute("points") or ""
    assert len(points.split()) >= 1
    legend = page.locator("#chart-ticks .legend").text_content() or ""
    assert "enqueued" in legend
    assert page.locator("#chart-jobs polyline.series").count() == 5
    top = page.locator("#chart-ticks figcaption").text_content() or ""
    assert "top 1)" not in top, f"ticks were rolled up from the schedule's real ticks: {top}"
    box = page.locator("#chart-ticks svg").bounding_box()
    assert box is not None and box["width"] > 200 and box["height"] > 100


def test_console_end_to_end(tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: tests/run.sh installs it with apt")
    (tmp_path / "console_host.py").write_text(HOST_MODULE)
    with (
        serving(tmp_path, "--app", "console_host:hg") as (process, base),
        sync_playwright() as playwright,
    ):
        wait_until_answering(f"{base}/")
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page()
        refused = _watch_for_refusals(page)
        page.on("dialog", lambda dialog: dialog.accept())
        _create_a_schedule_and_enqueue_now(page, base, tmp_path)
        _pause_stops_ticks_and_resume_starts_them(page, base)
        _a_failing_schedule_says_so_and_leads_to_its_traceback(page, base)
        _a_schedule_as_of_before_an_edit_shows_the_old_spec_and_the_diff(page, base)
        job_id = _a_failed_job_shows_its_attempts_and_retry_runs_it(page, base, tmp_path)
        _bulk_retry_takes_the_filtered_failed_jobs(page, base, tmp_path)
        _quarantine_shows_a_banner_until_released(page, browser, base)
        _the_index_searches_and_fits_a_phone_with_every_column_in_view(page, browser, base)
        _the_overview_draws_charts_from_the_roll_up(page, tmp_path, base)
        for path in (
            "/overview",
            "/limits",
            "/queues",
            "/",
            "/jobs",
            f"/jobs/{job_id}",
            "/workers",
            "/schedules/pulse",
            "/schedules/pulse/as-of?as_of=9999999999999",
            "/schedules/pulse/changes",
            f"/jobs/{job_id}/as-of?as_of=9999999999999",
            "/schedules/poison",
            "/schedules/new",
        ):
            _fits_a_phone(browser, f"{base}{path}")
        assert refused == [], "the CSP refused something the console does"
        browser.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0

    store = SqlStore(f"sqlite:///{tmp_path / 'headgate.db'}", FakeClock())
    try:
        manual = [e for e in store.log.read_all(0, 100_000) if e.type == "ManualRunRequested"]
        assert len(manual) == 1, "double-clicks make exactly one manual job"
    finally:
        store.close()
    assert (tmp_path / "console.png").stat().st_size > 10_000


def _create_a_schedule_and_enqueue_now(page: Page, base: str, tmp_path: Path) -> None:
    page.goto(f"{base}/schedules/new")
    assert page.is_hidden("#backfill-field")
    page.select_option("select[name=on_missed]", "backfill")
    assert page.is_visible("#backfill-field")
    page.select_option("select[name=on_missed]", "skip")
    page.fill("input[name=id]", "pulse")
    page.fill("input[name=spec]", "61 * * * *")
    # Predicates are functions, evaluated once: the pages' CSP refuses eval of a string.
    page.wait_for_function(
        "() => document.getElementById('spec-preview').textContent.includes('minute 61 out of range')"
    )
    page.fill("input[name=spec]", "@every:250ms")
    page.wait_for_function(
        "() => document.getElementById('spec-preview').textContent.includes("
        "'interval 250 ms is below the minimum of 1000 ms')"
    )
    page.fill("input[name=spec]", "@every:1s")
    page.wait_for_function(
        "() => document.getElementById('spec-preview').textContent.includes('Every second. Next:')"
    )
    page.fill("input[name=kind]", "demo.ping")
    page.fill("textarea[name=payload]", '{"hello": "world"}')
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/schedules/pulse")
    assert '"hello": "world"' in (page.text_content("#payload") or "")
    # No reload: the history refreshes itself.
    page.wait_for_function(
        "() => document.querySelectorAll('#events tbody tr.outcome-enqueued').length >= 2",
        timeout=15_000,
    )

    page.dblclick("#enqueue-now")
    page.wait_for_selector("#manual-job")
    message = page.text_content("#action-result") or ""
    assert message.startswith("Enqueued job ")
    # A human double-click: the second click comes after the first reply.
    page.click("#enqueue-now")
    page.wait_for_function(
        "() => document.getElementById('action-result').textContent.startsWith('Already enqueued')"
    )
    assert (page.text_content("#action-result") or "").endswith(message.split()[-1])
    page.screenshot(path=str(tmp_path / "console.png"), full_page=True)
    page.click("#manual-job")
    page.wait_for_selector("#origin")
    assert "Enqueue now on pulse" in " ".join((page.text_content("#origin") or "").split())
    manual_id = message.split()[-1].rstrip(".")
    # Cancelled elsewhere meanwhile: the button shows the API's 409.
    _api(base, "POST", f"/jobs/{manual_id}/cancel")
    page.click("#cancel-job")
    page.wait_for_selector("#action-result.error")
    assert "cancelled" in (page.text_content("#action-result") or "")
    assert page.is_enabled("#cancel-job")
    page.click("#origin a")
    page.wait_for_selector(f"#runs a[href='/jobs/{manual_id}']")


def _bulk_retry_takes_the_filtered_failed_jobs(page: Page, base: str, tmp_path: Path) -> None:
    """The jobs list filtered to one kind's failed jobs, retried in bulk through
    the confirmation, which names the count; then seen run again."""
    broken = [_api(base, "POST", "/jobs", {"kind": "demo.broken"})["id"] for _ in range(3)]
    _api(base, "POST", "/jobs", {"kind": "demo.flaky"})  # another kind: left alone
    _eventually(
        lambda: {_api(base, "GET", f"/jobs/{job_id}")["state"] for job_id in broken} == {"failed"},
        "the broken jobs did not fail",
    )
    page.goto(f"{base}/jobs")
    assert page.get_attribute("header nav a[aria-current=page]", "href") == "/jobs"
    assert page.is_visible("#auto-refresh-control"), "shown once the script runs"
    page.click("#tab-failed")
    page.wait_for_url("**/jobs?state=failed")
    page.fill("#job-filters input[name=kind]", "demo.broken")
    page.click("#job-filters button[type=submit]")
    page.wait_for_selector("#tab-failed[aria-current=page]")
    assert "kind=demo.broken" in page.url and "state=failed" in page.url
    assert page.text_content("#count-failed") == "3"
    assert page.locator("#jobs tbody tr.job-failed").count() == 3
    assert "KeyError" in (page.text_content("#jobs tbody tr.job-failed .error-type") or "")

    asked: list[str] = []
    page.on("dialog", lambda dialog: asked.append(dialog.message))
    (tmp_path / "mended").touch()
    page.click("#bulk-retry")
    page.wait_for_function(
        "() => document.getElementById('action-result').textContent.startsWith('Retried 3 jobs')"
    )
    assert asked and asked[-1].startswith("Retry 3 of the 3 failed jobs these filters match")
    _eventually(
        lambda: (
            {_api(base, "GET", f"/jobs/{job_id}")["state"] for job_id in broken} == {"completed"}
        ),
        "the bulk-retried jobs did not run again",
    )
    page.reload()
    assert page.text_content("#count-failed") == "0"
    assert page.text_content("#count-completed") == "3"


def _pause_stops_ticks_and_resume_starts_them(page: Page, base: str) -> None:
    page.goto(f"{base}/schedules/pulse")
    page.click("button[data-path='/schedules/pulse/pause']")
    page.wait_for_selector(".badge.paused")
    assert page.text_content("#action-result") == "Paused pulse."
    assert "paused — would next run at" in (page.text_content("#next-run") or "")
    time.sleep(1.2)  # a tick already being written when the pause landed
    paused_at = _newest_tick(base, "pulse")
    time.sleep(2.0)
    assert _newest_tick(base, "pulse") == paused_at, "a paused schedule ticked"

    page.click("button[data-path='/schedules/pulse/resume']")
    page.wait_for_selector("button[data-path='/schedules/pulse/pause']")
    assert page.text_content("#action-result") == "Resumed pulse."
    _eventually(
        lambda: (_newest_tick(base, "pulse") or 0) > (paused_at or 0), "resume did not tick"
    )
    page.wait_for_selector("#events tr.gap", timeout=10_000)  # the ticks the pause skipped


def _a_failing_schedule_says_so_and_leads_to_its_traceback(page: Page, base: str) -> None:
    """The operator's first question, from the schedule list: which schedule is
    failing, and why: one click to its page, one to the run's job and traceback."""
    _api(base, "PUT", "/periodic/nightly-report", {"spec": "@every:1000", "kind": "demo.flaky"})
    _eventually(
        lambda: _api(base, "GET", "/periodic/nightly-report")["health"]["state"] == "failing",
        "the failing schedule was not judged failing",
        timeout=30,
    )
    row = page.locator("#schedules tr[data-schedule='nightly-report']")

    def the_list_shows_the_failure() -> bool:
        # A tick fires every second: the newest run may be one just enqueued, not yet
        # failed, until the page is read again.
        page.goto(f"{base}/?health=failing")
        return "RuntimeError" in (row.locator("td.last-run").text_content() or "")

    _eventually(the_list_shows_the_failure, "the list never showed the run's error", timeout=10)
    assert "failing" in (row.locator("td.health").text_content() or "")
    assert page.locator("#schedules tbody tr[data-schedule]").count() == 1, "only the failing"
    row.locator("a[href='/schedules/nightly-report']").click()
    page.wait_for_selector("#health")
    assert "failing" in (page.text_content("#health h2") or "")
    assert "RuntimeError" in (page.text_content("#last-failure") or "")
    failed = page.locator("#runs tbody tr.run-failed").first
    assert "RuntimeError" in (failed.text_content() or "")
    failed.locator("a[href^='/jobs/']").click()
    page.wait_for_selector("#attempts-table")
    newest = page.locator("#attempts-table tbody tr").nth(0).locator("details.traceback")
    newest.locator("summary").click()
    trace = newest.locator("pre").text_content() or ""
    assert "in flaky" in trace and "disk full on attempt" in trace
    _api(base, "DELETE", "/periodic/nightly-report")


def _a_schedule_as_of_before_an_edit_shows_the_old_spec_and_the_diff(page: Page, base: str) -> None:
    """Edited in the console's form, then viewed with the time picker as of a
    second before the edit: the old spec, under a banner; the changes view shows
    the edit as a diff made through the console."""
    before_edit = datetime.fromtimestamp(int(time.time()), UTC)
    time.sleep(1.2)  # the picker says seconds: the edit lands in a later one
    page.goto(f"{base}/schedules/pulse/edit")
    page.fill("input[name=spec]", "@every:2s")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/schedules/pulse")
    assert "@every:2000" in (page.text_content("#spec") or "")  # as stored
    page.fill("input[name=as_of]", before_edit.strftime("%Y-%m-%dT%H:%M:%S"))
    page.click(".as-of-picker button[type=submit]")
    page.wait_for_selector("#as-of-banner")
    assert "@every:1000" in (page.text_content("#spec") or "")
    assert "As of " + before_edit.strftime("%Y-%m-%d %H:%M:%S") in (
        page.text_content("#as-of-banner") or ""
    )
    page.click("text=Changes and who made them")
    page.wait_for_selector("#changes")
    edit = page.locator("#changes tr", has_text="@every:2000")
    assert "@every:1000" in (edit.text_content() or "")
    assert "through the console" in (page.text_content("#changes") or "")


def _a_failed_job_shows_its_attempts_and_retry_runs_it(
    page: Page, base: str, tmp_path: Path
) -> str:
    job_id = _api(base, "POST", "/jobs", {"kind": "demo.flaky", "payload": {"day": 1}})["id"]
    _eventually(
        lambda: _api(base, "GET", f"/jobs/{job_id}")["state"] == "failed",
        "the flaky job did not fail twice",
    )
    page.goto(f"{base}/jobs?state=failed")
    page.click(f"#jobs a[href='/jobs/{job_id}']")
    page.wait_for_selector("#attempts-table")
    assert page.text_content("#job-state") == "failed"
    assert "RuntimeError: disk full on attempt 2" in (page.text_content("#error") or "")
    attempts = page.locator("#attempts-table tbody tr")
    assert attempts.count() == 2
    assert "disk full on attempt 1" in (attempts.nth(1).text_content() or "")
    newest = attempts.nth(0).locator("details.traceback")
    assert not newest.locator("pre").is_visible(), "the traceback starts collapsed"
    newest.locator("summary").click()
    trace = newest.locator("pre").text_content() or ""
    assert newest.locator("pre").is_visible()
    assert trace.startswith("Traceback (most recent call last):")
    assert "in flaky" in trace and trace.rstrip().endswith("disk full on attempt 2")
    assert page.locator("#cancel-job").count() == 0

    (tmp_path / "fixed").touch()
    page.click("#retry-job")
    page.wait_for_selector("#cancel-job, #job-state:has-text('completed')")
    assert page.text_content("#action-result") == "Retried: the job is pending again."
    _eventually(
        lambda: _api(base, "GET", f"/jobs/{job_id}")["state"] == "completed",
        "the retried job did not run again",
    )
    page.reload()
    assert page.text_content("#job-state") == "completed"
    assert '"fixed": "yes"' in (page.text_content("#result") or "")
    assert page.locator("#retry-job, #cancel-job").count() == 0
    assert page.locator("#error").count() == 0, "a completed job shows no error of its own"
    assert page.text_content("#attempts") == "1 of 2", "the limit its attempts ran under"
    outcomes = page.locator("#attempts-table tbody tr").all_text_contents()
    assert [" ".join(row.split()[:2]) for row in outcomes] == [
        "1 succeeded",
        "Retried by",
        "2 failed",
        "1 failed",
    ]
    return job_id


def _the_index_searches_and_fits_a_phone_with_every_column_in_view(
    page: Page, browser: Browser, base: str
) -> None:
    _api(base, "PUT", "/periodic/minutely", {"kind": "demo.ping", "spec": "@every:60000"})
    _api(
        base,
        "PUT",
        "/periodic/new-york-morning",
        {"kind": "demo.ping", "spec": "CRON_TZ=America/New_York 0 9 * * 1-5"},
    )
    page.goto(f"{base}/")
    page.fill("#schedule-search input[name=search]", "minu")
    page.click("#schedule-search button[type=submit]")
    page.wait_for_url(f"{base}/?search=minu&health=")
    assert page.locator("#schedules tbody tr").count() == 1
    assert "1 schedule whose id starts with “minu”" in (page.text_content("#schedule-total") or "")

    phone = browser.new_page(viewport=PHONE)
    try:
        phone.goto(f"{base}/")
        for schedule_id in ("minutely", "new-york-morning"):
            row = phone.locator(f"#schedules tr[data-schedule='{schedule_id}']")
            for part in ("td.health", "td.next-run", "td.card-actions button"):
                box = row.locator(part).bounding_box()
                assert box is not None and box["width"] > 0, f"{schedule_id}: {part} is hidden"
                assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (
                    f"{schedule_id}: {part} is off-screen at 390 px ({box})"
                )
        spec = phone.locator("#schedules tr[data-schedule='minutely'] code.spec")
        assert spec.text_content() == "@every:60000"
        lines = spec.evaluate("code => code.getClientRects().length")
        assert lines == 1, "@every:60000 breaks across lines at 390 px"
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the index scrolls sideways at 390 px ({width} px)"
    finally:
        phone.close()


def _quarantine_shows_a_banner_until_released(page: Page, browser: Browser, base: str) -> None:
    # Quarantined by hand: what the rescuer records after a payload crashed its
    # workers three times (crashing workers here would take minutes).
    _api(
        base,
        "PUT",
        "/periodic/poison",
        {"kind": "demo.poison", "spec": "@every:1000", "payload": {"bad": True}},
    )
    fingerprint = Quarantine.fingerprint("demo.poison", {"bad": True})
    _eventually(
        lambda: bool(_api(base, "GET", "/jobs?kind=demo.poison&limit=1")["jobs"]),
        "the poison schedule made no job",
    )
    [job] = _api(base, "GET", "/jobs?kind=demo.poison&limit=1")["jobs"]
    assert job["fingerprint"] == fingerprint
    page.goto(f"{base}/jobs/{job['id']}")
    assert fingerprint in (page.text_content("#fingerprint") or "")
    page.click("#quarantine-fingerprint")
    page.wait_for_selector("#fingerprint-quarantined")
    assert f"by hand, from job {job['id']}" in (page.text_content("#fingerprint") or "")
    assert (page.text_content("#action-result") or "").startswith("Quarantined ")
    page.goto(f"{base}/schedules/poison")
    banner = page.text_content("#quarantine-banner") or ""
    assert f"by hand, from job {job['id']}" in banner and "skipped (quarantined)" in banner
    page.wait_for_selector("#events tr.outcome-skipped", timeout=10_000)
    assert "quarantined" in (page.text_content("#events tr.outcome-skipped") or "")
    _fits_a_phone(browser, f"{base}/quarantine")

    page.click("#quarantine-banner a[href='/quarantine']")
    page.click(f"tr[data-fingerprint='{fingerprint}'] button.release")
    page.wait_for_selector("text=Nothing is quarantined.")
    assert (page.text_content("#action-result") or "").startswith("Released ")
    page.goto(f"{base}/schedules/poison")
    assert page.locator("#quarantine-banner").count() == 0
    page.wait_for_selector("#events tr.outcome-enqueued", timeout=10_000)
    page.click("#delete")
    page.wait_for_selector("#deleted-banner")
    assert page.locator("#enqueue-now, #delete").count() == 0
    assert page.locator("#events tr.outcome-enqueued").count() >= 1


def test_api_docs_render_with_no_internet(tmp_path: Path) -> None:
    """Swagger UI draws the API's operations from the package's own assets, with
    every request to another host refused (an air-gapped host)."""
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: tests/run.sh installs it with apt")
    with serving(tmp_path) as (process, base), sync_playwright() as playwright:
        wait_until_answering(f"{base}/healthz")
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page()
        refused = _watch_for_refusals(page)
        elsewhere: list[str] = []

        def only_this_server(route: Route) -> None:
            if route.request.url.startswith(base):
                route.continue_()
            else:
                elsewhere.append(route.request.url)
                route.abort()

        page.route("**/*", only_this_server)
        page.goto(f"{base}/docs")
        page.wait_for_selector(".opblock-summary-path", timeout=15_000)
        paths = page.locator(".opblock-summary-path").all_text_contents()
        assert any("/api/v1/schedules" in path for path in paths)
        assert page.locator(".errors-wrapper").count() == 0
        assert elsewhere == []
        assert refused == [], "the CSP refused something Swagger UI does"
        browser.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0


TOKEN = "browser-s3cret"


@contextmanager
def _another_origin(pages: dict[str, str]) -> Iterator[str]:
    """A second local server, on another port of the same host (so the same
    site: SameSite cookies go along), serving `pages` as HTML: an attacker's."""

    class Pages(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path, "not here").encode()
            self.send_response(200 if self.path in pages else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _attacks(base: str, job_id: str) -> dict[str, str]:
    cancel = f"{base}/api/v1/jobs/{job_id}/cancel"
    pause = f"{base}/api/v1/periodic/pulse/pause"
    done = "document.title = 'sent'"
    return {
        "/frame": f'<iframe id="victim" src="{base}/schedules/pulse" width="800" height="600"></iframe>',
        "/form": f'<form id="f" method="POST" action="{cancel}"></form>'
        "<script>document.getElementById('f').submit()</script>",
        "/fetch": f'<script>fetch("{pause}", {{method: "POST", mode: "no-cors", credentials: "include"}})'
        f".finally(() => {{ {done} }})</script>",
        "/text": f'<script>fetch("{pause}", {{method: "POST", mode: "no-cors", credentials: "include",'
        ' headers: {"Content-Type": "text/plain"}, body: "{}"})'
        f".finally(() => {{ {done} }})</script>",
        "/hidden": '<meta name="referrer" content="no-referrer">'
        f'<form id="f" method="POST" action="{cancel}"></form>'
        "<script>document.getElementById('f').submit()</script>",
    }


def _other_origins_change_nothing(
    context: BrowserContext, base: str, job_id: str, token: str | None
) -> None:
    """Pages on another port of this host (the same site: a SameSite cookie goes
    along) post forms, no-cors fetches and a frame at the console: the schedule
    stays unpaused, the job pending, the frame empty."""

    def paused() -> bool:
        return bool(_api(base, "GET", "/periodic/pulse", token=token)["paused"])

    assert not paused()
    with _another_origin(_attacks(base, job_id)) as evil:
        attacker = context.new_page()
        for path in ("/fetch", "/text"):
            attacker.goto(f"{evil}{path}")
            attacker.wait_for_function("() => document.title === 'sent'")
            assert not paused(), f"{path} paused the schedule"
        for path in ("/form", "/hidden"):
            with attacker.expect_navigation(url=f"{base}/api/v1/jobs/{job_id}/cancel") as nav:
                attacker.goto(f"{evil}{path}")
            response = nav.value
            assert response is not None and response.status == 403, path
            assert _api(base, "GET", f"/jobs/{job_id}", token=token)["state"] == "pending"
        # The load event waits for the frame: refused, it holds the browser's error page.
        attacker.goto(f"{evil}/frame", wait_until="load")
        frame = attacker.frame_locator("#victim")
        assert frame.locator(".brand").count() == 0, "the console rendered in a frame"
        assert frame.locator("button[data-path]").count() == 0
        attacker.close()


def test_no_page_on_another_origin_can_frame_the_console_or_make_it_write(
    tmp_path: Path,
) -> None:
    """`headgate serve` as it starts by default: no token, on 127.0.0.1."""
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: tests/run.sh installs it with apt")
    with serving(tmp_path) as (process, base), sync_playwright() as playwright:
        wait_until_answering(f"{base}/healthz")
        _api(base, "PUT", "/periodic/pulse", {"kind": "demo", "spec": "@every:60000"})
        job_id = _api(base, "POST", "/jobs", {"kind": "nobody.runs.this"})["id"]
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        context = browser.new_context()
        _other_origins_change_nothing(context, base, job_id, None)
        browser.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0


def test_log_in_act_and_log_out_under_the_csp_while_other_origins_can_do_nothing(
    tmp_path: Path,
) -> None:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: tests/run.sh installs it with apt")
    with (
        serving(tmp_path, environment={"HEADGATE_API_TOKEN": TOKEN}) as (process, base),
        sync_playwright() as playwright,
    ):
        wait_until_answering(f"{base}/healthz")
        _api(base, "PUT", "/periodic/pulse", {"kind": "demo", "spec": "@every:60000"}, TOKEN)
        job_id = _api(base, "POST", "/jobs", {"kind": "nobody.runs.this"}, TOKEN)["id"]
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        context = browser.new_context()
        page = context.new_page()
        refused = _watch_for_refusals(page)

        page.goto(f"{base}/schedules/pulse")
        assert page.locator("#logout").count() == 0
        page.fill("#login input[name=token]", "wrong")
        page.click("#login button[type=submit]")
        page.wait_for_selector("#login-error:has-text('wrong token')")
        page.fill("#login input[name=token]", TOKEN)
        page.click("#login button[type=submit]")
        page.wait_for_selector("#logout")
        (cookie,) = [c for c in context.cookies() if c["name"] == "headgate_session"]
        assert TOKEN not in cookie["value"] and cookie["httpOnly"]

        page.click("button[data-path='/schedules/pulse/pause']")
        page.wait_for_selector(".badge.paused")
        assert page.text_content("#action-result") == "Paused pulse."
        page.click("button[data-path='/schedules/pulse/resume']")
        page.wait_for_selector("button[data-path='/schedules/pulse/pause']")

        _other_origins_change_nothing(context, base, job_id, TOKEN)

        page.click("#logout")
        page.wait_for_url(f"{base}/login")
        page.wait_for_selector("#login input[name=token]")
        page.goto(f"{base}/")
        assert page.locator("#login").count() == 1 and page.locator("#logout").count() == 0
        stale = urllib.request.Request(
            f"{base}/api/v1/periodic", headers={"Cookie": f"headgate_session={cookie['value']}"}
        )
        with pytest.raises(urllib.error.HTTPError) as logged_out:
            urllib.request.urlopen(stale, timeout=5)
        assert logged_out.value.code == 401, "the session ended with the logout"
        assert refused == [], "the CSP refused something the console does"
        browser.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
