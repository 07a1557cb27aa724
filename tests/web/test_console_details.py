"""What the console says about a job and a schedule, on SQLite and PostgreSQL:
the limits a job runs under and where they come from, its attempt history
through retries, crashes and the attempt under way, no stale error once it
completes; the schedules list searched, counted and paged; upcoming runs on
the schedule's own clock; ids that tell jobs apart; specs in words."""

from __future__ import annotations

import re
import threading
from html import unescape
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from headgate import Headgate, JobContext, WorkerConfig
from headgate._domain.events import JobAbandoned, JobClaimed
from headgate._domain.streams import job_stream
from headgate._operator import operator_of
from headgate.testing import FakeClock
from tests.web.conftest import START_MS

MINUTE = 60_000


def _html(client: TestClient, path: str, status: int = 200) -> str:
    response = client.get(path)
    assert response.status_code == status, response.text
    return response.text


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _fact(html: str, fact_id: str) -> str:
    found = re.search(rf'<dd id="{fact_id}">(.*?)</dd>', html, re.S)
    assert found is not None, fact_id
    return _text(found.group(1))


def _rows(html: str, table_id: str) -> list[str]:
    body = re.split(rf'<table id="{table_id}"[^>]*>', html, maxsplit=1)[1].split("</table>")[0]
    return [_text(row) for row in re.findall(r"<tr\b.*?</tr>", body.split("<tbody>")[1], re.S)]


class TestLimits:
    def test_a_jobs_own_limits_are_shown_as_they_are(
        self, client: TestClient, hg: Headgate
    ) -> None:
        job = hg.enqueue("report.build", max_attempts=5, timeout_s=90)
        html = _html(client, f"/jobs/{job.id}")
        assert _fact(html, "attempts") == "0 of 5"
        assert _fact(html, "timeout") == "1 min 30 s"

    def test_without_its_own_the_handlers_registered_here(
        self, client: TestClient, hg: Headgate
    ) -> None:
        @hg.handler("report.build", max_attempts=3, timeout_s=20)
        def build(job: JobContext) -> None:
            return None

        html = _html(client, f"/jobs/{hg.enqueue('report.build').id}")
        assert _fact(html, "attempts") == "0 of 3 (its handler's setting, as registered here)"
        assert _fact(html, "timeout") == "20 s (its handler's setting, as registered here)"

    def test_without_a_handler_here_the_default_and_what_it_cannot_know(
        self, client: TestClient, hg: Headgate
    ) -> None:
        html = _html(client, f"/jobs/{hg.enqueue('report.build').id}")
        attempts, timeout = _fact(html, "attempts"), _fact(html, "timeout")
        assert attempts.startswith("0 of 25 (default) Headgate's default: the job sets no")
        assert "no handler for report.build" in attempts
        assert "whether the handler that runs the job sets its own" in attempts
        assert timeout.startswith("30 min (default)")
        limits = operator_of(hg).job_settings(
            hg.jobs.get(hg.enqueue("report.build", max_attempts=2).id)
        )
        assert (limits.max_attempts.value, limits.max_attempts.source) == (2, "job")
        assert (limits.timeout_ms.value, limits.timeout_ms.source) == (1_800_000, "default")


class TestAttemptHistory:
    def test_a_retry_is_marked_where_the_numbers_start_again(
        self, client: TestClient, hg: Headgate, clock: FakeClock
    ) -> None:
        @hg.handler("report.build", max_attempts=2)
        def build(job: JobContext) -> None:
            raise RuntimeError(f"disk full on attempt {job.attempt}")

        job_id = hg.enqueue("report.build").id
        for _ in range(2):
            hg.drain()
            clock.advance(10 * MINUTE)
        hg.jobs.retry(job_id)
        hg.drain()
        rows = _rows(_html(client, f"/jobs/{job_id}"), "attempts-table")
        assert [row.split(" ")[0:2] for row in rows[:1] + rows[2:]] == [
            ["1", "failed"],
            ["2", "failed"],
            ["1", "failed"],
        ]
        assert rows[1].startswith("Retried by an operator at 2024-01-01 00:20:00 UTC")
        assert [a.outcome for a in hg.jobs.get(job_id).attempt_history] == [
            "failed",
            "retried",
            "failed",
            "failed",
        ]
        api = client.get(f"/api/v1/jobs/{job_id}").json()
        assert api["attempt_history"][1] == {
            "attempt": 0,
            "outcome": "retried",
            "worker_id": None,
            "started_at_ms": None,
            "ended_at_ms": START_MS + 20 * MINUTE,
            "duration_ms": None,
            "error_type": None,
            "error_message": None,
            "traceback": None,
        }

    def test_a_crash_shows_the_attempt_it_ended_and_when_that_began(
        self, client: TestClient, hg: Headgate, clock: FakeClock
    ) -> None:
        job_id = hg.enqueue("report.build").id
        claimed_at = clock.now_ms()
        hg._core.store.log.append(job_stream(job_id), 1, [JobClaimed(job_id, "w-9", 1, 10**13)])
        clock.advance(MINUTE)
        crash = JobAbandoned(job_id, "w-9", 1, attempt=1, claimed_at_ms=claimed_at)
        hg._core.store.log.append(job_stream(job_id), 2, [crash])
        [row] = _rows(_html(client, f"/jobs/{job_id}"), "attempts-table")
        assert row == (
            "1 (not counted) crashed w-9 2024-01-01 00:00:00 UTC 2024-01-01 00:01:00 UTC —"
        ), "a crash has no duration: its handler's end is unknown"

    def test_the_attempt_under_way_heads_the_history(
        self, client: TestClient, hg: Headgate, clock: FakeClock
    ) -> None:
        started, release = threading.Event(), threading.Event()

        @hg.handler("report.build", timeout_s=120)
        def build(job: JobContext) -> None:
            started.set()
            release.wait(10)

        hg.start(WorkerConfig(queues={"default": 1}, poll_interval_ms=20), scheduler=False)
        try:
            job_id = hg.enqueue("report.build").id
            assert started.wait(10)
            html = _html(client, f"/jobs/{job_id}")
            running = hg.jobs.get(job_id).running_attempt
            assert running is not None
        finally:
            release.set()
            hg.stop()
        [row] = _rows(html, "attempts-table")
        assert row == (
            f"1 running {running.worker_id} 2024-01-01 00:00:00 UTC"
            " times out at 2024-01-01 00:02:00 UTC"
        )
        assert 'id="running-attempt"' in html
        done = hg.jobs.get(job_id)
        assert done.running_attempt is None and done.state == "completed"

    def test_a_completed_job_has_no_error_of_its_own_but_its_failed_attempts_keep_theirs(
        self, client: TestClient, hg: Headgate, clock: FakeClock
    ) -> None:
        @hg.handler("report.build")
        def build(job: JobContext) -> str:
            if job.attempt == 1:
                raise RuntimeError("disk full")
            return "done"

        job_id = hg.enqueue("report.build").id
        hg.drain()
        waiting = _html(client, f"/jobs/{job_id}")
        assert "Last error" in waiting and 'id="error"' in waiting
        clock.advance(10 * MINUTE)
        hg.drain()
        html = _html(client, f"/jobs/{job_id}")
        assert 'id="error"' not in html
        assert "disk full" in _rows(html, "attempts-table")[1]
        api = client.get(f"/api/v1/jobs/{job_id}").json()
        assert (api["state"], api["error_type"], api["error_message"]) == ("completed", None, None)
        assert api["attempt_history"][1]["error_type"] == "RuntimeError"


class TestSchedulesIndex:
    @pytest.fixture
    def bulk(self, hg: Headgate) -> Headgate:
        hg.schedules.put_many(
            [{"schedule_id": f"bulk-{n}", "spec": "@every:60000", "kind": "k"} for n in range(120)]
        )
        hg.schedules.put("nightly", spec="0 9 * * *", kind="report")
        return hg

    def test_the_index_counts_its_schedules_and_pages_through_them(
        self, client: TestClient, bulk: Headgate
    ) -> None:
        first = _html(client, "/")
        assert _text(re.search(r'<p id="schedule-total".*?</p>', first, re.S).group(0)) == (  # type: ignore[union-attr]
            "121 schedules, by id, 50 on this page."
        )
        assert 'id="first-page"' not in first
        following = re.search(r'id="next-page" href="([^"]+)"', first)
        assert following is not None
        second = _html(client, unescape(following.group(1)))
        assert 'id="first-page" href="/?"' in second
        assert len(_rows(second, "schedules")) == 50

    def test_a_search_keeps_the_ids_starting_with_it_through_its_pages(
        self, client: TestClient, bulk: Headgate
    ) -> None:
        html = _html(client, "/?search=bulk-1")
        total = re.search(r'<p id="schedule-total".*?</p>', html, re.S)
        assert total is not None
        assert _text(total.group(0)) == (
            "31 schedules whose id starts with “bulk-1”, by id, 31 on this page."
        )
        listed = [re.search(r'data-schedule="([^"]+)"', row) for row in html.split("<tr")[1:]]
        ids = [found.group(1) for found in listed if found]
        assert ids[:4] == ["bulk-1", "bulk-10", "bulk-100", "bulk-101"] and len(ids) == 31
        assert 'value="bulk-1"' in html and 'id="next-page"' not in html
        paged = _html(client, "/?search=bulk-")
        following = re.search(r'id="next-page" href="([^"]+)"', paged)
        assert following is not None and "search=bulk-" in following.group(1)
        again = _html(client, unescape(following.group(1)))
        assert 'id="first-page" href="/?search=bulk-"' in again
        assert "nightly" not in again

    @pytest.mark.parametrize(
        "search",
        ["\x00", "x" * 10_000, "%_\\'\"", "<b>x</b>", "\U0010ffff", "bulk-1\x00"],
        ids=["nul", "10k", "like-wildcards", "markup", "highest-code-point", "nul-after"],
    )
    def test_odd_searches_find_nothing_and_say_so(
        self, client: TestClient, bulk: Headgate, search: str
    ) -> None:
        html = _html(client, f"/?search={quote(search, safe='')}")
        assert "No schedule id starts with" in html and "<b>x" not in html
        assert "0 schedules whose id starts with" in _text(html)
        api = client.get("/api/v1/periodic", params={"search": search})
        assert api.status_code in (200, 422), api.text
        if api.status_code == 200:
            assert api.json()["schedules"] == []

    def test_the_api_searches_alike(self, client: TestClient, bulk: Headgate) -> None:
        found = client.get("/api/v1/periodic", params={"search": "bulk-11", "limit": 5}).json()
        assert [s["id"] for s in found["schedules"]] == [
            "bulk-11",
            "bulk-110",
            "bulk-111",
            "bulk-112",
            "bulk-113",
        ]
        more = client.get(
            "/api/v1/periodic", params={"search": "bulk-11", "cursor": found["next_cursor"]}
        ).json()
        assert [s["id"] for s in more["schedules"]] == [
            "bulk-114",
            "bulk-115",
            "bulk-116",
            "bulk-117",
            "bulk-118",
            "bulk-119",
        ]
        too_long = client.get("/api/v1/periodic", params={"search": "x" * 256})
        assert too_long.status_code == 422


class TestSchedulePage:
    def test_upcoming_runs_show_the_schedules_own_clock_too(
        self, client: TestClient, hg: Headgate
    ) -> None:
        hg.schedules.put("ny", spec="CRON_TZ=America/New_York 0 9 * * *", kind="report")
        rows = _rows(_html(client, "/schedules/ny"), "upcoming")
        assert rows[0] == (
            "2024-01-01 14:00:00 UTC 2024-01-01 09:00:00 EST 2024-01-01 14:00:00 UTC"
        )
        assert "<th>In America/New_York</th>" in _html(client, "/schedules/ny")
        hg.schedules.put("utc", spec="0 9 * * *", kind="report")
        assert _rows(_html(client, "/schedules/utc"), "upcoming")[0] == (
            "2024-01-01 09:00:00 UTC 2024-01-01 09:00:00 UTC"
        )

    def test_tick_jobs_are_told_apart_by_the_end_of_their_ids(
        self, client: TestClient, hg: Headgate, clock: FakeClock
    ) -> None:
        hg.schedules.put("pulse", spec="@every:1000", kind="ping")
        hg.start(workers=False)
        try:
            for _ in range(3):
                clock.advance(1_000)
                assert hg.fire_due_ticks()
        finally:
            hg.stop()
        html = _html(client, "/schedules/pulse")
        history = re.search(r'<table id="events">.*?</table>', html, re.S)
        assert history is not None
        shown = re.findall(r'title="([^"]+)"><code>([^<]+)</code>', history.group(0))
        assert len(shown) == 3
        assert len({short for _, short in shown}) == 3
        assert all(short == "…" + job_id[-12:] for job_id, short in shown)
        assert len({job_id[:8] for job_id, _ in shown}) == 1  # what every one showed before

    def test_a_cron_is_described_in_words_or_not_at_all(
        self, client: TestClient, hg: Headgate
    ) -> None:
        hg.schedules.put("weekdays", spec="0 9 * * 1-5", kind="report")
        hg.schedules.put("odd", spec="*/7 * * * *", kind="report")
        assert _fact(_html(client, "/schedules/weekdays"), "spec") == (
            "0 9 * * 1-5 — At 09:00 on Mon\N{EN DASH}Fri, UTC"
        )
        assert _fact(_html(client, "/schedules/odd"), "spec") == "*/7 * * * *"
        index = _html(client, "/")
        assert "At 09:00 on Mon\N{EN DASH}Fri, UTC" in index and "Cron " not in index
