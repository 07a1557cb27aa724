"""Nobody firing the ticks is said, not silent: workers and no scheduler leave
schedules due, and Python, the API, /readyz, the console, /metrics and the
workers' own log say so once the schedules have waited past a takeover's time;
a scheduler that starts ends it. And `headgate scheduler --app` runs one alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client import generate_latest
from structlog.testing import capture_logs

from headgate import Headgate, JobContext, RuntimeConfig, WorkerConfig
from headgate._domain.scheduler_watch import SchedulerState, SchedulerWatch, grace_ms
from headgate.testing import FakeClock
from headgate.web import create_app
from tests.web.conftest import LOCAL
from tests.web.serving import headgate_command

pytestmark = pytest.mark.processes

MINUTE = 60_000


@pytest.mark.parametrize(
    ("live", "oldest_due", "state"),
    [
        (False, None, SchedulerState.OK),
        (False, 100_000 - 10_000, SchedulerState.OK),
        (False, 100_000 - 10_001, SchedulerState.NO_SCHEDULER),
        (True, 100_000 - 10_001, SchedulerState.BEHIND),
        (True, 100_000 + 5_000, SchedulerState.OK),
    ],
)
def test_the_state_is_told_by_the_lease_and_how_long_the_oldest_due_waited(
    live: bool, oldest_due: int | None, state: SchedulerState
) -> None:
    watch = SchedulerWatch(live, oldest_due, 100_000, grace_ms(1_500))
    assert watch.state is state
    assert watch.behind_ms == (0 if oldest_due is None else max(100_000 - oldest_due, 0))


def test_the_grace_covers_a_takeover() -> None:
    assert grace_ms(1_500) == 10_000
    assert grace_ms(30_000) == 60_000


def test_workers_without_a_scheduler_are_told_everywhere_until_one_starts(
    make_headgate: Callable[..., Headgate], clock: FakeClock
) -> None:
    hg = make_headgate(RuntimeConfig(lease_ttl_ms=1_500))

    @hg.handler("report.build")
    def build(job: JobContext) -> None:
        return None

    hg.schedules.put("nightly", spec="@every:60000", kind="report.build")
    assert hg.runtime.scheduler_health().state == "ok", "nothing is due yet"
    clock.advance(MINUTE + 10_001)  # due a minute ago, past the grace
    with capture_logs() as logs:
        hg.start(WorkerConfig(poll_interval_ms=20), scheduler=False)
        deadline = time.monotonic() + 10
        while not any(line.get("scheduler") == "no_scheduler" for line in logs):
            assert time.monotonic() < deadline, logs
            time.sleep(0.02)
    [said] = [line for line in logs if line.get("scheduler") == "no_scheduler"]
    assert said["log_level"] == "warning"
    assert said["event"].startswith("no process is the scheduler: schedules have been due for")

    health = hg.runtime.scheduler_health()
    assert (health.state, health.holder, health.behind_ms) == ("no_scheduler", None, 10_001)
    client = TestClient(create_app(hg, api_token=""), base_url=LOCAL)
    assert client.get("/api/v1/scheduler").json()["state"] == "no_scheduler"
    ready = client.get("/readyz")
    assert ready.status_code == 200, "the API still serves"
    assert ready.json()["scheduler"]["state"] == "no_scheduler"
    assert 'id="scheduler-banner"' in client.get("/").text
    metrics = generate_latest(hg.metrics.registry).decode()
    assert "headgate_scheduler_missing 1.0" in metrics
    assert "headgate_scheduler_behind_seconds 10.001" in metrics

    hg.stop()
    hg.start(WorkerConfig(poll_interval_ms=20))  # and now the scheduler too
    hg.fire_due_ticks()
    assert hg.runtime.scheduler_health().state == "ok"
    assert hg.runtime.scheduler_health().holder is not None
    assert 'id="scheduler-banner"' not in client.get("/").text
    assert "headgate_scheduler_missing 0.0" in generate_latest(hg.metrics.registry).decode()


APP = textwrap.dedent(
    """
    from headgate import Headgate, JobContext

    hg = Headgate("sqlite:///{database}")

    @hg.periodic("pulse", spec="@every:1000", queue="pulses")
    def pulse(job: JobContext) -> None:
        return None
    """
)


def test_the_scheduler_command_fires_the_apps_ticks_and_releases_its_lease(
    tmp_path: Path,
) -> None:
    database = tmp_path / "jobs.db"
    (tmp_path / "pulses_app.py").write_text(APP.format(database=database))
    scheduler = subprocess.Popen(
        [headgate_command(), "scheduler", "--app", "pulses_app:hg"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not database.exists():
            assert time.monotonic() < deadline, "the scheduler made no store"
            time.sleep(0.05)
        with Headgate(f"sqlite:///{database}") as client:
            while len(client.jobs.list(schedule_id="pulse").jobs) < 2:
                assert time.monotonic() < deadline, "no ticks fired"
                time.sleep(0.05)
            assert client.runtime.lease() is not None
            assert client.runtime.workers() == [], "a scheduler runs no workers"
            scheduler.send_signal(signal.SIGTERM)
            assert scheduler.wait(timeout=20) == 0
            assert client.runtime.lease() is None, "released at the stop"
    finally:
        if scheduler.poll() is None:
            scheduler.kill()
    output = scheduler.stdout.read() if scheduler.stdout else ""
    assert "headgate: scheduler stopped; lease released" in output
    assert "Traceback" not in output
