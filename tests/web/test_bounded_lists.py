"""Cheap requests make no unbounded page, list or series: 2,000 jobs on 2,000 new
queues (each a line of the unserved banner, a row of the queues, a label of the
metrics, a line of the overview) show as the busiest few and "and N more" (the
API's `more`, the metrics' and the activity's `_other`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from headgate import Headgate, RuntimeConfig
from headgate._domain.activity import MINUTE_MS, QUEUE_DEPTH, Snapshot, roll_up
from headgate._domain.activity import MinuteRows as Rows
from headgate._domain.shown import CHART_SHOWN, OTHER, SERIES_SHOWN
from headgate._store.port import Store
from headgate.cli import main
from headgate.testing import FakeClock
from headgate.web import create_app
from tests.web.conftest import LOCAL, START_MS

QUEUES = 2_000


@pytest.fixture
def crowded(store_url: str) -> Iterator[Headgate]:
    """A store with one pending job on each of 2,000 queues (queue q0 has 3), and
    q1999 paused, with no worker anywhere."""
    config = RuntimeConfig(lease_ttl_ms=3_600_000)
    with Headgate(store_url, clock=FakeClock(START_MS), config=config) as hg:
        hg.enqueue_many(
            [{"kind": f"k{i}", "queue": f"q{i}"} for i in range(QUEUES)]
            + [{"kind": "k0", "queue": "q0"}] * 2
        )
        hg.queues.pause(f"q{QUEUES - 1}")
        yield hg


@pytest.fixture
def web(crowded: Headgate) -> Iterator[TestClient]:
    with TestClient(create_app(crowded, api_token=""), base_url=LOCAL) as client:
        yield client


def test_the_unserved_banner_shows_the_busiest_and_how_many_more(web: TestClient) -> None:
    for path in ("/", "/jobs", "/workers", "/limits", "/quarantine"):
        page = web.get(path)
        assert page.status_code == 200
        assert len(page.content) < 60_000, (path, len(page.content))
        banner = page.text.split('id="unserved-banner"', 1)[1].split("</div>", 1)[0]
        assert banner.count("<li>") == 10
        assert "3 of kind k0 on queue q0" in banner, "the busiest first"
        assert "and 1,990 more" in banner


def test_the_queues_page_shows_the_paused_and_busiest_and_how_many_more(
    web: TestClient,
) -> None:
    page = web.get("/queues").text
    rows = re.findall(r'<tr data-queue="([^"]+)">', page)
    assert len(rows) == 200 and rows == sorted(rows), "by name"
    assert {"q0", f"q{QUEUES - 1}"} <= set(rows), "the busiest and the paused one"
    assert "and 1,800 more queues" in page


def test_the_api_lists_are_pages_with_a_count_of_the_rest(web: TestClient) -> None:
    queues = web.get("/api/v1/queues").json()
    assert (len(queues["queues"]), queues["more"]) == (200, 1_800)
    most = web.get("/api/v1/queues", params={"limit": 1_000}).json()
    assert (len(most["queues"]), most["more"]) == (1_000, 1_000)
    assert web.get("/api/v1/queues", params={"limit": 1_001}).status_code == 422
    unserved = web.get("/api/v1/unserved", params={"limit": 5}).json()
    assert (len(unserved["unserved"]), unserved["more"]) == (5, QUEUES - 5)
    assert unserved["unserved"][0] == {
        "queue": "q0",
        "kind": "k0",
        "pending": 3,
        "reason": unserved["unserved"][0]["reason"],
    }


def _families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {
        family.name: [(sample.labels, sample.value) for sample in family.samples]
        for family in text_string_to_metric_families(text)
    }


def test_metrics_have_a_bounded_number_of_series_and_sum_the_rest(web: TestClient) -> None:
    text = web.get("/metrics").text
    assert len(text) < 100_000, len(text)
    families = _families(text)
    jobs = families["headgate_jobs"]
    queues = {labels["queue"] for labels, _ in jobs}
    assert len(queues) == SERIES_SHOWN + 1 and OTHER in queues
    total = sum(value for labels, value in jobs if labels["state"] == "pending")
    assert total == QUEUES + 2, "every pending job counted once, the rest under _other"
    paused = dict((labels["queue"], value) for labels, value in families["headgate_queue_paused"])
    assert paused[f"q{QUEUES - 1}"] == 1 and paused[OTHER] == 0
    unserved = families["headgate_jobs_unserved"]
    assert len(unserved) == SERIES_SHOWN + 1
    assert sum(value for _, value in unserved) == QUEUES + 2
    assert (
        {"queue": OTHER, "kind": OTHER},
        QUEUES + 2 - sum(value for labels, value in unserved if labels["queue"] != OTHER),
    ) in unserved


def test_this_process_labels_a_bounded_number_of_queue_and_kind_pairs(
    crowded: Headgate,
) -> None:
    metrics = crowded._core.metrics  # the Recorder the runtime calls
    for index in range(SERIES_SHOWN + 30):
        metrics.attempt_ended(f"q{index}", f"k{index}", "succeeded", 10)
    families = _families(_exposition(crowded))
    attempts = families["headgate_job_attempts"]
    pairs = {(labels["queue"], labels["kind"]) for labels, _ in attempts}
    assert len(pairs) == SERIES_SHOWN + 1 and (OTHER, OTHER) in pairs
    assert sum(value for _, value in attempts) == SERIES_SHOWN + 30


def _exposition(hg: Headgate) -> str:
    from prometheus_client import generate_latest

    return generate_latest(hg.metrics.registry).decode()


def test_the_activity_roll_up_keeps_a_bounded_number_of_points_a_minute() -> None:
    pending = {f"q{i}": i for i in range(QUEUES)}
    oldest = {f"q{i}": float(i) for i in range(QUEUES)}
    limits = [(f"queue=q{i}", i % 7, 10) for i in range(QUEUES)]
    points = roll_up(0, Rows(), Snapshot(pending, oldest, limits))
    assert len(points) < 4 + 5 + 4 * (CHART_SHOWN + 1) + 10
    depth = {p.key: p.value for p in points if p.series == QUEUE_DEPTH}
    assert len(depth) == CHART_SHOWN + 1
    assert depth[f"q{QUEUES - 1}"] == QUEUES - 1, "the deepest have their own"
    assert sum(depth.values()) == sum(pending.values()), "the rest summed under _other"
    oldest_shown = {p.key: p.value for p in points if p.series == "oldest_pending_s"}
    assert oldest_shown[OTHER] == QUEUES - 1 - CHART_SHOWN


def test_the_activity_api_reads_a_bounded_window(crowded: Headgate) -> None:
    store: Store = crowded._core.store
    now = crowded.clock.now_ms()
    old = now - now % MINUTE_MS - 2 * 86_400_000
    store.activity.record(old, roll_up(old, Rows(), Snapshot()), 0)
    assert crowded.metrics.activity(since_ms=0) == [], "nothing older than the day kept is read"


def test_the_cli_lists_are_bounded_and_say_how_many_more(
    crowded: Headgate, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["queues", "list", "--db", store_url, "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert (
        out.splitlines()[-1]
        == "and 1,997 more queues, each with fewer jobs (--limit N shows up to 1,000)"
    )
    assert main(["jobs", "unserved", "--db", store_url, "--limit", "2", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert (len(listed["unserved"]), listed["more"]) == (2, QUEUES - 2)
