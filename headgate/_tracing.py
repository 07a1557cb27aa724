"""OpenTelemetry traces of jobs, when the host has the API installed
(`pip install 'headgate-jobs[otel]'`) and configured a tracer provider;
otherwise every function here does nothing.

* An enqueue is a PRODUCER span ("enqueue <kind>"), a child of the caller's
  current span; the job carries its context (W3C trace context, as the
  global propagator writes it) in `trace_context`.
* A tick is a span of its own ("tick <schedule_id>"), from its planning to its
  record; its job carries the tick's context.
* An attempt is a CONSUMER span ("run <kind>"): the first continues the trace
  its job carries (a child of the enqueue or tick), each later one (a retry,
  a run after a crash or a snooze) starts a trace of its own linked to it, as
  OpenTelemetry's messaging conventions have a consumer do for a message
  processed again.

No payload, result or error text goes into a span: the kind, queue, job id,
attempt and, for a tick, its schedule and tick instant; an error by its type
alone (the SDK's own recording of an exception, with its message and
traceback, is switched off). Nor is the caller's baggage kept in the job: it
often names users or tenants, and a job's row and event keep it for good.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

try:
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
except ImportError:  # the optional extra is not installed
    trace = None  # type: ignore[assignment]

TRACER: Final = "headgate"
MAX_CONTEXT_CHARS: Final = 1024
"""A job's trace context beyond this keeps its traceparent only (a large tracestate
or baggage has no place in every job row)."""
SYSTEM: Final = "headgate"


def enabled() -> bool:
    return trace is not None


def recording() -> bool:
    """Whether spans started now go anywhere: the API is installed and the host has
    set a tracer provider. Until it does, the API's default provider makes spans
    that record nothing, and a tick batch skips making one per tick (a tenth of
    a tick's cost). Cheap enough to ask once per batch, so a provider set later
    is followed from the next batch on."""
    if trace is None:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


@contextlib.contextmanager
def enqueue_span(kind: str, queue: str | None, count: int = 1) -> Iterator[str | None]:
    """Around an enqueue (of `count` jobs, on `queue` when they share one): the
    trace context its jobs carry, or None when nothing records traces."""
    if trace is None:
        yield None
        return
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "headgate.job.kind": kind,
    }
    if queue is not None:
        attributes["messaging.destination.name"] = queue
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    tracer = trace.get_tracer(TRACER)
    with tracer.start_as_current_span(
        f"enqueue {kind}",
        kind=SpanKind.PRODUCER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield _carried(span)
        except BaseException as error:
            _failed(span, error)
            raise


def start_tick_span(schedule_id: str, tick_ms: int, job_id: str, kind: str) -> Any:
    """A tick's span, started (end it with `end_tick_span`); None without tracing."""
    if trace is None:
        return None
    return trace.get_tracer(TRACER).start_span(
        f"tick {schedule_id}",
        kind=SpanKind.PRODUCER,
        attributes={
            "messaging.system": SYSTEM,
            "headgate.schedule_id": schedule_id,
            "headgate.tick_ms": tick_ms,
            "messaging.message.id": job_id,
            "headgate.job.kind": kind,
        },
    )


def context_of(span: Any) -> str | None:
    """The trace context a span's job carries (None: no span, or not recorded)."""
    return None if span is None else _carried(span)


def end_tick_span(span: Any, outcome: str, reason: str, *, failed: bool = False) -> None:
    if span is None:
        return
    span.set_attribute("headgate.outcome", outcome)
    span.set_attribute("headgate.reason", reason)
    if failed:
        span.set_status(Status(StatusCode.ERROR, reason))
    span.end()


@contextlib.contextmanager
def attempt_span(
    *,
    kind: str,
    queue: str,
    job_id: str,
    attempt: int,
    first: bool,
    carried: str | None,
    origin: tuple[str, int] | None = None,
) -> Iterator[Any]:
    """Around one attempt: a span that continues the job's trace (`first`) or links
    to it. Yields the span (None without tracing) for `attempt_ended`."""
    if trace is None:
        yield None
        return
    parent = _extracted(carried)
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.destination.name": queue,
        "messaging.message.id": job_id,
        "headgate.job.kind": kind,
        "headgate.job.attempt": attempt,
    }
    if origin is not None:
        attributes["headgate.schedule_id"], attributes["headgate.tick_ms"] = origin
    tracer = trace.get_tracer(TRACER)
    linked = trace.get_current_span(parent).get_span_context() if parent is not None else None
    continues = first and parent is not None
    links = [] if continues or linked is None or not linked.is_valid else [Link(linked)]
    started = tracer.start_as_current_span(
        f"run {kind}",
        context=parent if continues else _ROOT,
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    )
    with started as span:
        try:
            yield span
        except BaseException as error:
            _failed(span, error)
            raise


def attempt_ended(span: Any, outcome: str, error_type: str | None = None) -> None:
    """Say how the attempt ended on its span (its error's type only, never its text)."""
    if span is None:
        return
    span.set_attribute("headgate.outcome", outcome)
    if error_type is not None:
        span.set_attribute("error.type", error_type)
        span.set_status(Status(StatusCode.ERROR))


def _failed(span: Span, error: BaseException) -> None:
    """An exception leaving a span, by its type alone: spans start with the SDK's
    recording of it (an event with its message and traceback) switched off."""
    span.set_attribute("error.type", type(error).__qualname__)
    span.set_status(Status(StatusCode.ERROR))


def _carried(span: Span) -> str | None:
    if not span.get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    carrier.pop("baggage", None)
    text = json.dumps(carrier, sort_keys=True, separators=(",", ":"))
    if len(text) > MAX_CONTEXT_CHARS:
        text = json.dumps({"traceparent": carrier.get("traceparent", "")}, separators=(",", ":"))
    return text if carrier else None


def _extracted(carried: str | None) -> Any:
    if carried is None:
        return None
    try:
        carrier = json.loads(carried)
    except ValueError:
        return None
    if not isinstance(carrier, Mapping):
        return None
    return propagate.extract({str(k): str(v) for k, v in carrier.items()})


_ROOT: Final = None if trace is None else trace.set_span_in_context(trace.INVALID_SPAN)
"""A context with no current span: a retry's span starts a trace of its own."""
