"""GET /metrics: scraped through the app and parsed with prometheus_client's own
parser, after real ticks, jobs, failures and rescues, on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from headgate import Headgate, JobContext, RuntimeConfig, WorkerConfig
from headgate._domain.events import JobClaimed
from headgate._domain.streams import job_stream
from headgate._errors import StoreUnavailable
from headgate._runtime.duties import MAINTENANCE_LEASE
from headgate._runtime.heartbeat import worker_identity
from headgate._runtime.rescuer import Rescuer
from headgate._store.port import Fence, Store, WorkerBeat
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from headgate.web import create_app
from tests.faults import FaultyStore
from tests.web.conftest import LOCAL

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
ALLOWED_LABELS = {"queue", "kind", "state", "outcome", "reason", "le", "schedule"}
"""Label names a series may carry: `schedule` holds a schedule id (up to
`RuntimeConfig.schedule_series_max` of them), never a job's."""


def _scrape_text(client: TestClient, path: str = "/metrics", **kwargs: Any) -> str:
    response = client.get(path, **kwargs)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == CONTENT_TYPE_LATEST
    return response.text


def _samples(text: str) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def _scrape(client: TestClient, **kwargs: Any) -> Samples:
    return _samples(_scrape_text(client, **kwargs))


def _value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def test_a_tick_fired_by_the_runtime_is_counted_with_its_lateness_and_the_lease(
    hg: Headgate, client: TestClient, clock: FakeClock, store_url: str
) -> None:
    before = _scrape(client)
    assert _value(before, "headgate_store_up") == 1
    assert _value(before, "headgate_scheduler_lease_term") == 0  # never taken
    assert _value(before, "headgate_scheduler_lease_held") == 0
    assert _value(before, "headgate_ticks_total", outcome="enqueued", reason="accepted") is None

    schedule = hg.schedules.put("pulse", spec="@every:60000", kind="ping")
    clock.set(schedule.next_run_ms + 250)  # due, a quarter of a second ago
    assert _value(_scrape(client), "headgate_schedules_due") == 1
    hg.start(workers=False)
    assert hg.fire_due_ticks()

    after = _scrape(client)
    assert _value(after, "headgate_ticks_total", outcome="enqueued", reason="accepted") == 1
    assert _value(after, "headgate_tick_lateness_seconds_count") == 1
    assert _value(after, "headgate_tick_lateness_seconds_sum") == pytest.approx(0.25)
    assert _value(after, "headgate_tick_lateness_seconds_bucket", le="0.1") == 0
    assert _value(after, "headgate_tick_lateness_seconds_bucket", le="0.25") == 1
    assert _value(after, "headgate_schedules_due") == 0
    lease = hg.runtime.lease()
    assert lease is not None and lease.term >= 1
    assert _value(after, "headgate_scheduler_lease_term") == lease.term
    assert _value(after, "headgate_scheduler_lease_active") == 1
    assert _value(after, "headgate_scheduler_lease_held") == 1
    assert _value(after, "headgate_jobs", queue="default", state="pending") == 1
    other = Headgate(store_url, clock=clock, config=RuntimeConfig(lease_ttl_ms=3_600_000))
    try:
        other.start(workers=False)  # another process: it waits for the lease
        elsewhere = _samples(generate_latest(other.metrics.registry).decode())
        assert _value(elsewhere, "headgate_scheduler_lease_active") == 1
        assert _value(elsewhere, "headgate_scheduler_lease_held") == 0
        assert (
            _value(elsewhere, "headgate_ticks_total", outcome="enqueued", reason="accepted") is None
        )
    finally:
        other.close()

    hg.stop()  # releases the lease: nobody holds it now, and its term stays
    stopped = _scrape(client)
    assert _value(stopped, "headgate_scheduler_lease_active") == 0
    assert _value(stopped, "headgate_scheduler_lease_held") == 0
    assert _value(stopped, "headgate_scheduler_lease_term") == lease.term


def test_jobs_by_queue_and_state_the_oldest_pending_age_and_the_attempts(
    hg: Headgate, client: TestClient, clock: FakeClock
) -> None:
    @hg.handler("report.build", queue="reports")
    def build(job: JobContext) -> None:
        clock.advance(1_500)  # each run takes 1.5 s of the fake clock

    hg.enqueue("report.build", {"n": 1})
    clock.advance(2_000)
    hg.enqueue("report.build", {"n": 2})
    clock.advance(5_000)
    waiting = _scrape(client)
    assert _value(waiting, "headgate_jobs", queue="reports", state="pending") == 2
    assert _value(waiting, "headgate_jobs", queue="reports", state="completed") == 0
    assert _value(waiting, "headgate_oldest_pending_job_age_seconds", queue="reports") == 7.0

    assert hg.drain().succeeded == 2
    done = _scrape(client)
    assert _value(done, "headgate_jobs", queue="reports", state="pending") == 0
    assert _value(done, "headgate_jobs", queue="reports", state="completed") == 2
    assert _value(done, "headgate_oldest_pending_job_age_seconds", queue="reports") == 0
    labels = {"queue": "reports", "kind": "report.build"}
    assert _value(done, "headgate_job_attempts_total", outcome="succeeded", **labels) == 2
    assert _value(done, "headgate_job_run_duration_seconds_count", **labels) == 2
    assert _value(done, "headgate_job_run_duration_seconds_sum", **labels) == 3.0
    # The first waited 7 s, the second 5 s, then 1.5 s more behind the first.
    assert _value(done, "headgate_job_pickup_latency_seconds_count", **labels) == 2
    assert _value(done, "headgate_job_pickup_latency_seconds_sum", **labels) == 7.0 + 6.5


def test_a_failing_handler_counts_a_failed_attempt_and_its_job_waits_again(
    hg: Headgate, client: TestClient, clock: FakeClock
) -> None:
    @hg.handler("flaky", max_attempts=3)
    def flaky(job: JobContext) -> None:
        raise RuntimeError(f"boom for {job.id}")

    job = hg.enqueue("flaky", {"secret": "payload-text"})
    assert hg.drain().retrying == 1
    samples = _scrape(client)
    labels = {"queue": "default", "kind": "flaky"}
    assert _value(samples, "headgate_job_attempts_total", outcome="failed", **labels) == 1
    assert _value(samples, "headgate_job_attempts_total", outcome="succeeded", **labels) is None
    assert _value(samples, "headgate_jobs", queue="default", state="pending") == 1
    # Its retry is due after a backoff: until then it waits for nobody.
    assert _value(samples, "headgate_oldest_pending_job_age_seconds", queue="default") == 0
    retry_at = hg.jobs.get(job.id).run_at_ms
    clock.set(retry_at + 3_000)
    samples = _scrape(client)
    assert _value(samples, "headgate_oldest_pending_job_age_seconds", queue="default") == 3.0


def _die_running(store: Store, clock: FakeClock, job_id: str, worker_id: str) -> None:
    """A worker claims the job, then stops heartbeating (as a SIGKILL leaves it)."""
    store.workers.beat(WorkerBeat(worker_id, "host", 1, {"default": 1}, 0, 1, 0), ttl_ms=1_000)
    version = store.log.stream_version(job_stream(job_id))
    store.log.append(job_stream(job_id), version, [JobClaimed(job_id, worker_id, 1, 10**13)])
    clock.advance(2_000)


def test_rescues_and_quarantines_are_counted(
    hg: Headgate, client: TestClient, clock: FakeClock
) -> None:
    store = hg._core.store
    rescuer = Rescuer(
        store,
        clock,
        worker_identity("rescuer"),
        WorkerConfig(crash_limit=2, rescue_interval_ms=100),
        recorder=hg._core.metrics,
    )
    lease = store.leases.acquire(MAINTENANCE_LEASE, worker_identity("keeper"), 60_000)
    assert lease is not None
    fence = Fence(MAINTENANCE_LEASE, lease.term)
    job = hg.enqueue("poison", {"x": 1}, queue="imports")
    _die_running(store, clock, job.id, "dead-1")
    assert rescuer.rescue_expired(fence) == 1  # crash 1: claimable again
    labels = {"queue": "imports", "kind": "poison"}
    samples = _scrape(client)
    assert _value(samples, "headgate_job_rescues_total", **labels) == 1
    assert _value(samples, "headgate_job_quarantines_total", **labels) is None
    assert _value(samples, "headgate_quarantined_fingerprints") == 0

    _die_running(store, clock, job.id, "dead-2")
    assert rescuer.rescue_expired(fence) == 1  # crash 2: the crash limit
    samples = _scrape(client)
    assert _value(samples, "headgate_job_rescues_total", **labels) == 2
    assert _value(samples, "headgate_job_quarantines_total", **labels) == 1
    assert _value(samples, "headgate_jobs", queue="imports", state="quarantined") == 1
    assert _value(samples, "headgate_quarantined_fingerprints") == 1


def test_no_label_carries_an_id_a_payload_or_an_error_text(
    hg: Headgate, client: TestClient, clock: FakeClock
) -> None:
    @hg.handler("email.send")
    def send(job: JobContext) -> None:
        if job.payload["to"] == "bad@example.com":
            raise ValueError("mailbox bad@example.com is full")

    schedule = hg.schedules.put(
        "sched-7f3a91", spec="@every:60000", kind="email.send", payload={"to": "ada@example.com"}
    )
    jobs = [hg.enqueue("email.send", {"to": to}) for to in ("bad@example.com", "bob@example.com")]
    clock.set(schedule.next_run_ms)
    hg.start(workers=False)
    assert hg.fire_due_ticks()
    hg.drain()
    text = _scrape_text(client)
    samples = _samples(text)
    ids = {job.id for job in jobs} | {j.id for j in hg.jobs.list().jobs}
    assert len(ids) == 3
    for (name, labels), _ in samples.items():
        assert {key for key, _ in labels} <= ALLOWED_LABELS, name
        for key, value in labels:
            assert value not in ids and "@" not in value and "full" not in value, (name, value)
            assert key == "schedule" or value != "sched-7f3a91", (name, key)
    for forbidden in (*ids, "example.com", "mailbox"):
        assert forbidden not in text
    assert _value(samples, "headgate_schedule_consecutive_failures", schedule="sched-7f3a91") == 0
    assert _value(samples, "headgate_job_attempts_total", **{
        "queue": "default", "kind": "email.send", "outcome": "failed"
    }) == 1  # fmt: skip


def test_the_token_guards_metrics_as_it_guards_the_api(hg: Headgate) -> None:
    with TestClient(create_app(hg, api_token="s3cret"), base_url=LOCAL) as client:
        refused = client.get("/metrics")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        assert "bearer token" in refused.json()["error"]
        assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        samples = _scrape(client, headers={"Authorization": "Bearer s3cret"})
        assert _value(samples, "headgate_store_up") == 1


def test_metrics_stay_out_of_the_openapi_document(client: TestClient) -> None:
    assert "/metrics" not in client.get("/openapi.json").json()["paths"]


class _Reads:
    """The real reads, until the store goes down: then each raises as a lost
    database does."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.down = False
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.down:
                raise StoreUnavailable("reading: store unavailable: connection refused")
            return found(*args, **kwargs)

        return call


@pytest.fixture
def failing(store_url: str, clock: FakeClock) -> Iterator[tuple[Headgate, _Reads]]:
    store = FaultyStore(SqlStore(store_url, clock))
    reads = _Reads(store.inner.reads)
    store.reads = reads  # type: ignore[assignment]
    hg = Headgate(store, config=RuntimeConfig(lease_ttl_ms=3_600_000))
    yield hg, reads
    hg.close()


def test_an_unreadable_store_still_gets_an_answer_with_this_processs_counters(
    failing: tuple[Headgate, _Reads],
) -> None:
    hg, reads = failing

    @hg.handler("ping")
    def ping(job: JobContext) -> None:
        return None

    hg.enqueue("ping")
    hg.drain()
    with TestClient(create_app(hg, api_token=""), base_url=LOCAL) as client:
        reads.down = True
        samples = _scrape(client)
        assert _value(samples, "headgate_store_up") == 0
        labels = {"queue": "default", "kind": "ping", "outcome": "succeeded"}
        assert _value(samples, "headgate_job_attempts_total", **labels) == 1
        assert not [key for key in samples if key[0] == "headgate_jobs"]
        reads.down = False
        samples = _scrape(client)
        assert _value(samples, "headgate_store_up") == 1
        assert _value(samples, "headgate_jobs", queue="default", state="completed") == 1


def test_a_host_registers_the_collector_in_its_own_registry_or_mounts_the_route(
    failing: tuple[Headgate, _Reads],
) -> None:
    hg, reads = failing
    reads.down = True
    registry = CollectorRegistry(auto_describe=True)
    calls = reads.calls
    registry.register(hg.metrics.collector)
    assert reads.calls == calls  # registering describes the metrics: it reads no store
    assert _value(_samples(generate_latest(registry).decode()), "headgate_store_up") == 0
    reads.down = False
    assert _value(_samples(generate_latest(registry).decode()), "headgate_store_up") == 1

    host = FastAPI()
    host.mount("/scheduler", create_app(hg, api_token="s3cret"))
    with TestClient(host, base_url=LOCAL) as client:
        assert client.get("/scheduler/metrics").status_code == 401
        bearer = {"Authorization": "Bearer s3cret"}
        samples = _scrape(client, path="/scheduler/metrics", headers=bearer)
        assert _value(samples, "headgate_store_up") == 1


def test_two_headgates_in_one_process_count_apart(store_url: str, clock: FakeClock) -> None:
    first, second = Headgate(store_url, clock=clock), Headgate(store_url, clock=clock)
    try:

        @first.handler("ping")
        def ping(job: JobContext) -> None:
            return None

        first.enqueue("ping")
        first.drain()
        labels = {"queue": "default", "kind": "ping", "outcome": "succeeded"}
        mine = _samples(generate_latest(first.metrics.registry).decode())
        theirs = _samples(generate_latest(second.metrics.registry).decode())
        assert _value(mine, "headgate_job_attempts_total", **labels) == 1
        assert _value(theirs, "headgate_job_attempts_total", **labels) is None
        # The store's figures are the same store's, whoever scrapes it.
        assert _value(theirs, "headgate_jobs", queue="default", state="completed") == 1
    finally:
        first.close()
        second.close()
