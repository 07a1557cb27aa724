"""OpenTelemetry: a job carries its enqueuer's trace; its first attempt continues
it and every later one links to it; a tick is a span its job's attempts
continue; no payload reaches a span. With the SDK's in-memory exporter, on
each store.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from opentelemetry import baggage, context, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from headgate import DuplicateJob, Headgate, JobContext, Retry
from headgate._domain.streams import job_stream
from headgate.testing import FakeClock
from tests.conftest import AND_MEMORY
from tests.runtime.conftest import fire

SECRET = "card-4242"

_EXPORTER = InMemorySpanExporter()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(SimpleSpanProcessor(_EXPORTER))


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans this test ends (the provider is the process's one, set once)."""
    trace.set_tracer_provider(_PROVIDER)  # once per process: later calls are ignored
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name.startswith(prefix)]


def _no_secret_in(spans: list[ReadableSpan]) -> None:
    for span in spans:
        assert SECRET not in json.dumps(dict(span.attributes or {}), default=str)
        assert SECRET not in span.name
        assert SECRET not in str(span.status.description)
        for event in span.events:
            assert SECRET not in event.name
            assert SECRET not in json.dumps(dict(event.attributes or {}), default=str)


def test_a_refused_enqueue_says_its_errors_type_and_not_its_text(
    hg: Headgate, spans: InMemorySpanExporter
) -> None:
    hg.enqueue("mail", unique_key=f"user:{SECRET}")
    with pytest.raises(DuplicateJob):
        hg.enqueue("mail", unique_key=f"user:{SECRET}")
    refused = named(spans, "enqueue mail")[-1]
    assert refused.attributes is not None
    assert refused.attributes["error.type"] == "DuplicateJob"
    assert refused.status.status_code is StatusCode.ERROR
    _no_secret_in(named(spans, ""))


def test_a_job_carries_its_trace_and_not_the_callers_baggage(
    hg: Headgate, spans: InMemorySpanExporter
) -> None:
    tracer = trace.get_tracer("the-host")
    with tracer.start_as_current_span("POST /signup"):
        token = context.attach(baggage.set_baggage("user.email", SECRET))
        try:
            job = hg.enqueue("mail")
        finally:
            context.detach(token)
    (recorded,) = hg._core.store.log.read_stream(job_stream(job.id))
    carried = recorded.event.trace_context
    assert carried is not None and "traceparent" in json.loads(carried)
    assert SECRET not in carried


@AND_MEMORY
def test_the_first_attempt_continues_the_enqueuers_trace_and_a_retry_links_to_it(
    make_headgate: Callable[..., Headgate], clock: FakeClock, spans: InMemorySpanExporter
) -> None:
    hg = make_headgate()

    @hg.handler("charge", retry=Retry(intervals_s=(1,)))
    def charge(job: JobContext) -> str:
        if job.attempt == 1:
            raise ConnectionError(SECRET)
        return "charged"

    tracer = trace.get_tracer("the-host")
    with tracer.start_as_current_span("POST /checkout") as request:
        job = hg.enqueue("charge", {"card": SECRET})
    assert hg.jobs.get(job.id).state == "pending"
    hg.drain()
    clock.advance(2_000)
    hg.drain()
    assert hg.jobs.get(job.id).state == "completed"

    (enqueue,) = named(spans, "enqueue charge")
    first, retry = named(spans, "run charge")
    host = request.get_span_context()
    assert enqueue.kind is SpanKind.PRODUCER
    assert enqueue.parent is not None and enqueue.parent.span_id == host.span_id
    assert first.kind is SpanKind.CONSUMER
    assert first.context.trace_id == host.trace_id
    assert first.parent is not None and first.parent.span_id == enqueue.context.span_id
    assert first.attributes["headgate.outcome"] == "failed"
    assert first.attributes["error.type"] == "ConnectionError"
    assert first.attributes["messaging.message.id"] == job.id
    assert retry.context.trace_id != host.trace_id, "a retry is a trace of its own"
    assert retry.parent is None
    assert [link.context.span_id for link in retry.links] == [enqueue.context.span_id]
    assert (retry.attributes["headgate.job.attempt"], retry.attributes["headgate.outcome"]) == (
        2,
        "succeeded",
    )
    _no_secret_in([enqueue, first, retry])


@AND_MEMORY
def test_a_tick_is_a_span_its_jobs_attempt_continues(
    make_headgate: Callable[..., Headgate], clock: FakeClock, spans: InMemorySpanExporter
) -> None:
    hg = make_headgate()

    @hg.handler("report")
    def report(job: JobContext) -> None:
        return None

    hg.schedules.put("nightly", spec="@every:60000", kind="report", payload={"key": SECRET})
    clock.advance(60_000)
    hg.start(workers=False)  # the tick's job runs in drain(), in this thread
    fire(hg)
    hg.drain()
    (tick,) = named(spans, "tick nightly")
    (run,) = named(spans, "run report")
    assert tick.attributes["headgate.schedule_id"] == "nightly"
    assert tick.attributes["headgate.outcome"] == "enqueued"
    assert run.context.trace_id == tick.context.trace_id
    assert run.parent is not None and run.parent.span_id == tick.context.span_id
    assert run.attributes["headgate.tick_ms"] == tick.attributes["headgate.tick_ms"]
    _no_secret_in([tick, run])


@AND_MEMORY
def test_enqueue_many_is_one_span_every_job_continues(
    make_headgate: Callable[..., Headgate], spans: InMemorySpanExporter
) -> None:
    hg = make_headgate()

    @hg.handler("mail")
    def mail(job: JobContext) -> None:
        return None

    hg.enqueue_many([{"kind": "mail", "payload": {"to": n}} for n in range(3)])
    hg.drain()
    (batch,) = named(spans, "enqueue mail")
    runs = named(spans, "run mail")
    assert batch.attributes["messaging.batch.message_count"] == 3
    assert len(runs) == 3
    assert {run.parent.span_id for run in runs if run.parent} == {batch.context.span_id}
