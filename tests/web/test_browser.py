"""A real browser (Playwright driving Debian's Chromium) against `headgate serve`:
create a schedule through the form, watch ticks arrive, double-click Enqueue now."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page, Route, sync_playwright

from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from tests.web.serving import serving, wait_until_answering

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


def _enqueued_rows(page: Page) -> int:
    return page.locator("#events tbody tr.outcome-enqueued").count()


def test_console_end_to_end(tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: tests/run.sh installs it with apt")
    with serving(tmp_path) as (process, base), sync_playwright() as playwright:
        wait_until_answering(f"{base}/")
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page()
        page.goto(f"{base}/schedules/new")
        page.fill("input[name=id]", "pulse")
        page.fill("input[name=spec]", "61 * * * *")
        page.wait_for_function(
            "document.getElementById('spec-preview').textContent.includes('minute 61 out of range')"
        )
        page.fill("input[name=spec]", "@every:1000")
        page.wait_for_function(
            "document.getElementById('spec-preview').textContent.includes('Every second. Next:')"
        )
        page.fill("input[name=kind]", "demo.ping")
        page.fill("textarea[name=payload]", '{"hello": "world"}')
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/schedules/pulse")

        deadline = time.monotonic() + 20
        while _enqueued_rows(page) < 2:
            assert time.monotonic() < deadline, "ticks did not arrive in the events view"
            time.sleep(0.5)
            page.reload()

        page.dblclick("#enqueue-now")
        page.wait_for_selector("#manual-job")
        message = page.text_content("#action-result") or ""
        assert message.startswith("Enqueued job ")
        # A human double-click: the second click comes after the first reply.
        page.click("#enqueue-now")
        page.wait_for_function(
            "document.getElementById('action-result').textContent.startsWith('Already enqueued')"
        )
        assert (page.text_content("#action-result") or "").endswith(message.split()[-1])
        page.screenshot(path=str(tmp_path / "console.png"), full_page=True)
        page.click("#manual-job")
        page.wait_for_selector("#origin")
        assert "none (not created by the scheduler)" in (page.text_content("#origin") or "")
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


def test_api_docs_render_with_no_internet(tmp_path: Path) -> None:
    """Swagger UI draws the API's operations from the package's own assets, with
    every request to another host refused (an air-gapped host)."""
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: tests/run.sh installs it with apt")
    with serving(tmp_path) as (process, base), sync_playwright() as playwright:
        wait_until_answering(f"{base}/healthz")
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page()
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
        assert any("/api/v1/periodic" in path for path in paths)
        assert page.locator(".errors-wrapper").count() == 0
        assert elsewhere == []
        browser.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
