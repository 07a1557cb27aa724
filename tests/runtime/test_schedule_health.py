"""Each schedule's health, judged from its runs, on the fake clock: ok, then
failing after failures, ok again after a success; late when nobody takes its
job, missing when nobody fires its ticks, paused; the hooks told once per
change (a callable and a real webhook); the metrics' values."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import generate_latest
from structlog.testing import capture_logs

from headgate import Headgate, RuntimeConfig, ScheduleAlert
from headgate._domain.schedule_health import AlertKind, alert_on_settle
from headgate._errors import ValidationError
from headgate._operator import operator_of
from headgate.testing import FakeClock

MINUTE = 60_000


class _Flaky:
    def __init__(self) -> None:
        self.failing = True

    def __call__(self, payload: object) -> None:
        if self.failing:
            self._deep()

    def _deep(self) -> None:
        raise ConnectionError("the report database is down")


@pytest.fixture
def flaky() -> _Flaky:
    return _Flaky()


@pytest.fixture
def hg(make_headgate: Callable[..., Headgate], flaky: _Flaky) -> Headgate:
    hg = make_headgate(RuntimeConfig(lease_ttl_ms=1_500))
    hg.handler("report.build", max_attempts=1)(flaky)
    hg.schedules.put("nightly", spec="@every:60000", kind="report.build")
    return hg


def _tick(hg: Headgate, clock: FakeClock) -> None:
    clock.advance(MINUTE)
    assert hg.fire_due_ticks()
    hg.drain()


def _metric(hg: Headgate, name: str, **labels: str) -> float | None:
    text = generate_latest(hg.metrics.registry).decode()
    wanted = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
    for line in text.splitlines():
        if line.startswith(wanted + " "):
            return float(line.split()[-1])
    return None


def test_a_schedule_goes_failing_after_its_runs_fail_and_ok_after_one_succeeds(
    hg: Headgate, clock: FakeClock, flaky: _Flaky
) -> None:
    failures: list[ScheduleAlert] = []
    recoveries: list[ScheduleAlert] = []
    hg.schedules.on_failure(failures.append, schedule="nightly", after_failures=2)
    hg.schedules.on_recovery(recoveries.append, schedule="nightly", after_failures=2)
    hg.start(workers=False)
    assert hg.schedules.health("nightly").state == "ok"
    _tick(hg, clock)
    health = hg.schedules.health("nightly")
    assert (health.state, health.consecutive_failures) == ("failing", 1)
    assert health.last_error_type == "ConnectionError"
    assert failures == [], "the hook waits for two in a row"
    for _ in range(3):
        _tick(hg, clock)
    health = hg.schedules.health("nightly")
    assert (health.state, health.consecutive_failures) == ("failing", 4)
    assert [(a.kind, a.consecutive_failures, a.error_type) for a in failures] == [
        ("failure", 2, "ConnectionError")
    ], "told once, not at every failure"
    assert _metric(hg, "headgate_schedule_consecutive_failures", schedule="nightly") == 4
    assert (
        _metric(hg, "headgate_schedule_last_success_timestamp_seconds", schedule="nightly") is None
    )
    assert [hg.schedules.list(health=state).schedules for state in ("failing", "ok")] == [
        [hg.schedules.get("nightly")],
        [],
    ]

    flaky.failing = False
    _tick(hg, clock)
    health = hg.schedules.health("nightly")
    assert (health.state, health.consecutive_failures) == ("ok", 0)
    assert health.last_success_ms == clock.now_ms()
    assert health.last_run is not None and health.last_run.outcome == "succeeded"
    assert [(a.kind, a.consecutive_failures) for a in recoveries] == [("recovery", 4)]
    _tick(hg, clock)
    assert len(recoveries) == 1 and len(failures) == 1
    assert _metric(hg, "headgate_schedule_consecutive_failures", schedule="nightly") == 0
    assert _metric(
        hg, "headgate_schedule_last_success_timestamp_seconds", schedule="nightly"
    ) == pytest.approx(clock.now_ms() / 1000)
    assert _metric(hg, "headgate_schedule_health", schedule="nightly", state="ok") == 1

    runs = hg.schedules.runs("nightly", 10).runs
    assert [run.outcome for run in runs] == ["succeeded"] * 2 + ["failed"] * 4
    assert {run.error_type for run in runs[2:]} == {"ConnectionError"}


def test_a_job_nobody_takes_is_late_and_ticks_nobody_fires_are_missing(
    hg: Headgate, clock: FakeClock
) -> None:
    grace = hg.schedules.health("nightly").grace_ms
    hg.start(workers=False)
    clock.advance(MINUTE)
    assert hg.fire_due_ticks()
    assert hg.schedules.health("nightly").state == "ok"
    clock.advance(grace + 1)
    assert hg.fire_due_ticks() is not None
    assert hg.schedules.health("nightly").state == "late", "its job waited past the grace"
    hg.stop()
    clock.advance(MINUTE)
    assert hg.schedules.health("nightly").state == "missing", "no scheduler fired the next tick"
    assert operator_of(hg).count_schedules(health="missing") == 1
    hg.schedules.pause("nightly")
    assert hg.schedules.health("nightly").state == "paused"


def test_a_webhook_is_posted_the_alert_and_a_failing_one_holds_nothing_back(
    hg: Headgate, clock: FakeClock, flaky: _Flaky, webhook: _Webhook
) -> None:
    hg.schedules.on_failure(webhook.url)
    hg.schedules.on_failure("http://127.0.0.1:9/refused")  # nothing listens there
    hg.schedules.on_failure(_raises)
    hg.start(workers=False)
    with capture_logs() as logs:
        _tick(hg, clock)
    assert "s3cret" not in repr(logs), "a webhook's path and query stay out of the log"
    assert any(line["event"] == "a schedule alert webhook failed" for line in logs)
    (alert,) = webhook.received
    assert alert["kind"] == "failure" and alert["schedule_id"] == "nightly"
    assert alert["error_type"] == "ConnectionError"
    assert "report database" not in json.dumps(alert), "no error text, no payload"
    flaky.failing = False
    _tick(hg, clock)
    assert hg.schedules.health("nightly").state == "ok"


def test_a_bad_target_or_count_is_refused(hg: Headgate) -> None:
    with pytest.raises(ValidationError, match="target"):
        hg.schedules.on_failure("ftp://example.com/x")
    with pytest.raises(ValidationError, match="after_failures"):
        hg.schedules.on_failure(print, after_failures=0)


@pytest.mark.parametrize(
    ("settled", "after", "kind"),
    [
        ([("j3", "failed"), ("j2", "failed"), ("j1", "succeeded")], 2, AlertKind.FAILURE),
        ([("j3", "failed"), ("j2", "failed"), ("j1", "failed")], 2, None),
        ([("j3", "failed"), ("j2", "cancelled"), ("j1", "expired")], 2, AlertKind.FAILURE),
        ([("j3", "succeeded"), ("j2", "failed"), ("j1", "failed")], 2, AlertKind.RECOVERY),
        ([("j3", "succeeded"), ("j2", "failed"), ("j1", "succeeded")], 2, None),
        ([("j4", "failed"), ("j3", "failed"), ("j2", "failed")], 1, None),
        ([("j4", "enqueued"), ("j3", "failed"), ("j2", "succeeded")], 1, AlertKind.FAILURE),
        ([("j4", "succeeded"), ("j3", "failed")], 1, None),
    ],
)
def test_a_change_is_told_by_the_run_that_makes_it_and_only_while_newest(
    settled: list[tuple[str, str]], after: int, kind: AlertKind | None
) -> None:
    assert alert_on_settle(settled, "j3", after) is kind


def _raises(alert: ScheduleAlert) -> None:
    raise RuntimeError("a hook's own bug")


class _Webhook:
    def __init__(self, url: str, received: list[dict[str, Any]]) -> None:
        self.url = url
        self.received = received


@pytest.fixture
def webhook() -> Iterator[_Webhook]:
    received: list[dict[str, Any]] = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            received.append(json.loads(self.rfile.read(length)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield _Webhook(f"http://127.0.0.1:{server.server_port}/alerts?token=s3cret", received)
    finally:
        server.shutdown()
