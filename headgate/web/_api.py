"""The HTTP control API, /api/v1: a thin translation to the Headgate object.

Every route is a coroutine: its store calls run on the Headgate's own bounded
pool (`_async_api`; reads on threads of their own, so that they never queue
behind writes waiting for the writer), the ones a request makes together in
one turn of it (`in_store`), and the rest (parsing, validation, the answer's
JSON) on the event loop. A request thus crosses to a thread once, where sync routes crossed for
each dependency, the route itself and its answer's serialization, and the
store sees at most the pool's threads at once, however many clients wait.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Header, Query, Request, Response

from headgate._app import JOB_COUNT_CAP, Headgate
from headgate._domain.admission import MAX_STORED_ID_LENGTH
from headgate._domain.lifecycle import JobState
from headgate._domain.options import JOB_OPTION_FIELDS, JobOptions, ScheduleDefinition
from headgate._domain.shown import MAX_SHOWN, PAGE_SHOWN, busiest, queue_weight
from headgate._domain.spec import MAX_INSTANT_MS
from headgate._errors import NotFound, ValidationError
from headgate._model import QuarantineEntry
from headgate._operator import operator_of
from headgate._wire.activity import ActivityList, ActivityPointOut
from headgate._wire.errors import ErrorOut
from headgate._wire.fleet import (
    HandlerList,
    HandlerOut,
    LeaseOut,
    SchedulerHealthOut,
    WorkerOut,
    WorkersOut,
)
from headgate._wire.jobs import JobCountsOut, JobIn, JobList, JobOut, JobsBulkIn, JobsBulkOut
from headgate._wire.limits import (
    ConcurrencyLimitOut,
    LimitIn,
    LimitList,
    RateLimitIn,
    RateLimitList,
    RateLimitOut,
)
from headgate._wire.queues import (
    QuarantineIn,
    QuarantineList,
    QuarantineOut,
    QueueList,
    QueueOut,
    QueuePauseIn,
    UnservedList,
    UnservedOut,
)
from headgate._wire.schedules import (
    EventList,
    EventOut,
    RunOut,
    ScheduleChangesIn,
    ScheduleIn,
    ScheduleList,
    ScheduleOut,
    ScheduleRunList,
    ScheduleRunOut,
    SchedulesIn,
    SchedulesPutOut,
    SpecPreview,
    UpcomingList,
    UpcomingOut,
    preview,
)
from headgate.web._params import QueryInt

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": text}
    for code, text in {
        400: "Malformed request",
        401: "Missing or wrong token (when HEADGATE_API_TOKEN is set)",
        404: "No such schedule, job or quarantined fingerprint",
        409: "Conflict with stored state (e.g. a job's state does not allow the action)",
        413: "Body over 1 MiB",
        415: "Body is not JSON",
        422: "Invalid input: the message names the field and the rule",
        429: "The queue is full (backpressure)",
        503: "The store is unavailable",
    }.items()
}


T = TypeVar("T")


async def _each_query_parameter_once(request: Request) -> None:
    """A query parameter given twice is refused (422), where FastAPI would take
    the last of them silently."""
    seen: set[str] = set()
    for name, _ in request.query_params.multi_items():
        if name in seen:
            raise ValidationError(name, "is given more than once")
        seen.add(name)


router = APIRouter(
    prefix="/api/v1", responses=ERRORS, dependencies=[Depends(_each_query_parameter_once)]
)


def _hg(request: Request) -> Headgate:
    hg: Headgate = request.app.state.headgate
    return hg


async def in_store(request: Request, call: Callable[[Headgate], T], *, reads: bool = False) -> T:
    """`call(hg)` on the Headgate's pool: the store calls of one request, together
    (with `reads`, calls that write nothing: on the reads' threads, never queued
    behind writes waiting for the writer)."""
    hg = _hg(request)
    return await operator_of(hg).on_pool(lambda: call(hg), reads=reads)


@router.get(
    "/periodic",
    response_model=ScheduleList,
    summary="List schedules",
)
async def list_schedules(
    request: Request,
    limit: Annotated[QueryInt, Query(ge=1, le=200)] = 200,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    search: Annotated[
        str | None,
        Query(
            max_length=MAX_STORED_ID_LENGTH,
            description="Only schedules whose id starts with this (exactly, case and all)",
        ),
    ] = None,
    health: Annotated[
        str | None,
        Query(
            max_length=16,
            description="Only schedules in this state now: ok, failing, late, missing or paused",
        ),
    ] = None,
) -> ScheduleList:
    """Ordered by id, code point by code point; each with its health and last run."""

    def read(hg: Headgate) -> ScheduleList:
        page = hg.schedules.list(limit, cursor, search=search, health=health)
        judged = hg.schedules.health_of(page.schedules)
        return ScheduleList(
            schedules=[ScheduleOut.of(s, judged.get(s.id)) for s in page.schedules],
            next_cursor=page.next_cursor,
        )

    return await in_store(request, read, reads=True)


@router.put(
    "/periodic/{schedule_id}",
    response_model=ScheduleOut,
    summary="Create or replace a schedule (a full replace: fields left out take their defaults)",
    responses={201: {"model": ScheduleOut, "description": "Created"}},
)
async def put_schedule(
    request: Request, response: Response, schedule_id: str, body: ScheduleIn
) -> ScheduleOut:
    definition = ScheduleDefinition.from_fields(body.model_dump())
    result = await in_store(
        request, lambda hg: operator_of(hg).put_definition(schedule_id, definition)
    )
    response.status_code = 201 if result.outcome == "created" else 200
    return ScheduleOut.of(result.schedule)


@router.patch(
    "/periodic/{schedule_id}",
    response_model=ScheduleOut,
    summary="Change some fields of a schedule, keeping the rest",
    description=(
        "A field left out of the body is unchanged; one given as null is cleared "
        "(end_at_ms, max_attempts, ...). Only the fields given are checked. On a schedule "
        "declared in code, a change is an override that survives deploys."
    ),
)
async def update_schedule(
    request: Request, schedule_id: str, body: ScheduleChangesIn
) -> ScheduleOut:
    changes = body.model_dump(exclude_unset=True)
    return ScheduleOut.of(
        await in_store(
            request, lambda hg: operator_of(hg).update_schedule_fields(schedule_id, changes)
        )
    )


@router.delete(
    "/periodic/{schedule_id}/overrides",
    response_model=ScheduleOut,
    summary="Clear operators' overrides: the schedule becomes what its code declares",
)
async def clear_overrides(request: Request, schedule_id: str) -> ScheduleOut:
    return ScheduleOut.of(
        await in_store(request, lambda hg: hg.schedules.clear_overrides(schedule_id))
    )


@router.post(
    "/periodic:bulk",
    response_model=SchedulesPutOut,
    summary="Create or replace many schedules (201 if any was created, else 200)",
    description=(
        "Every item is checked before any is written: a bad one is a 422 naming it "
        '(`{"error": "schedules[3].spec: ..."}`), and so is an id given twice; nothing is '
        "written then. The rest follows PUT /periodic/{id}, per item. Written 500 per "
        "transaction: a 503 partway leaves the earlier ones written, and repeating the "
        "request is safe. The body limit (1 MiB) holds some 8,000 schedules of 130 bytes."
    ),
    responses={201: {"model": SchedulesPutOut, "description": "At least one was created"}},
)
async def put_schedules(request: Request, response: Response, body: SchedulesIn) -> SchedulesPutOut:
    items = []
    for item in body.schedules:
        fields = item.model_dump()
        items.append({"schedule_id": fields.pop("id"), **fields})
    try:
        result = await in_store(request, lambda hg: hg.schedules.put_many(items))
    except ValidationError as error:  # named as the body names it: `schedules[3].id`
        field = re.sub(r"^(schedules\[\d+\])\.schedule_id$", r"\1.id", error.field)
        raise ValidationError(field, error.rule) from None
    response.status_code = 201 if result.created else 200
    return SchedulesPutOut.of(result.outcomes)


@router.get("/periodic/{schedule_id}", response_model=ScheduleOut, summary="Read a schedule")
async def get_schedule(request: Request, schedule_id: str) -> ScheduleOut:
    def read(hg: Headgate) -> ScheduleOut:
        schedule = hg.schedules.get(schedule_id)
        return ScheduleOut.of(schedule, hg.schedules.health_of([schedule]).get(schedule.id))

    return await in_store(request, read, reads=True)


@router.get(
    "/periodic/{schedule_id}/runs",
    response_model=ScheduleRunList,
    summary="What became of each run (tick jobs and Enqueue now's), newest first",
)
async def schedule_runs(
    request: Request,
    schedule_id: str,
    limit: Annotated[QueryInt, Query(ge=1, le=100)] = 30,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> ScheduleRunList:
    """The newest 100 runs are kept, also after the schedule is deleted."""
    page = await _hg(request).schedules.aruns(schedule_id, limit, cursor)
    return ScheduleRunList(
        runs=[ScheduleRunOut.of(run) for run in page.runs], next_cursor=page.next_cursor
    )


@router.delete(
    "/periodic/{schedule_id}", status_code=204, summary="Delete a schedule (history stays)"
)
async def delete_schedule(request: Request, schedule_id: str) -> Response:
    await _hg(request).schedules.adelete(schedule_id)
    return Response(status_code=204)


def _utf8_header(name: str, value: str) -> str:
    """A header's value as the UTF-8 its client sent (httpx, requests and fetch send
    text as UTF-8), not the latin-1 Starlette reads every header as: the same key
    from any client is the same key. ValidationError (422) for bytes that are not
    UTF-8."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise ValidationError(name, "header is not valid UTF-8") from None


@router.post(
    "/periodic/{schedule_id}/run", status_code=202, response_model=RunOut, summary="Enqueue now"
)
async def enqueue_now(
    request: Request,
    schedule_id: str,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> RunOut:
    if idempotency_key is None:
        raise ValidationError("Idempotency-Key", "header is required")
    key = _utf8_header("Idempotency-Key", idempotency_key)
    result = await _hg(request).schedules.aenqueue_now(schedule_id, key)
    return RunOut(id=result.job_id, replayed=result.replayed)


@router.post(
    "/periodic/{schedule_id}/pause",
    response_model=ScheduleOut,
    summary="Pause a schedule (idempotent; its phase is kept)",
)
async def pause_schedule(request: Request, schedule_id: str) -> ScheduleOut:
    return ScheduleOut.of(await _hg(request).schedules.apause(schedule_id))


@router.post(
    "/periodic/{schedule_id}/resume",
    response_model=ScheduleOut,
    summary="Resume a schedule (idempotent; missed ticks follow its missed-run policy)",
)
async def resume_schedule(request: Request, schedule_id: str) -> ScheduleOut:
    return ScheduleOut.of(await _hg(request).schedules.aresume(schedule_id))


@router.get(
    "/periodic/{schedule_id}/enqueue-events",
    response_model=EventList,
    summary="Automatic enqueue attempts, newest first",
)
async def enqueue_events(
    request: Request,
    schedule_id: str,
    limit: Annotated[QueryInt, Query(ge=1, le=100)] = 30,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> EventList:
    page = await _hg(request).schedules.aenqueue_events(schedule_id, limit, cursor)
    return EventList(events=[EventOut.of(e) for e in page.events], next_cursor=page.next_cursor)


@router.get(
    "/periodic/{schedule_id}/upcoming",
    response_model=UpcomingList,
    summary="The next ticks it fires, from its stored next_run_ms, with their jittered instants",
)
async def upcoming(
    request: Request,
    schedule_id: str,
    count: Annotated[QueryInt, Query(ge=1, le=100)] = 5,
) -> UpcomingList:
    runs = await in_store(request, lambda hg: hg.schedules.upcoming(schedule_id, count), reads=True)
    return UpcomingList(
        upcoming=[UpcomingOut(tick_ms=r.tick_ms, due_at_ms=r.due_at_ms) for r in runs]
    )


@router.get(
    "/periodic/{schedule_id}/manual-runs",
    response_model=JobList,
    summary="Jobs this schedule's Enqueue now made, newest first",
)
async def manual_runs(
    request: Request,
    schedule_id: str,
    limit: Annotated[QueryInt, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> JobList:
    page = await in_store(
        request, lambda hg: hg.schedules.manual_runs(schedule_id, limit, cursor), reads=True
    )
    return JobList(jobs=[JobOut.of(job) for job in page.jobs], next_cursor=page.next_cursor)


@router.post("/jobs", status_code=201, response_model=JobOut, summary="Enqueue an ordinary job")
async def enqueue(request: Request, body: JobIn) -> JobOut:
    fields = body.model_dump()
    origin = fields["periodic_origin"]
    options = JobOptions(**{name: fields[name] for name in JOB_OPTION_FIELDS})
    job = await in_store(
        request,
        lambda hg: operator_of(hg).enqueue_job(fields["kind"], fields["payload"], options, origin),
    )
    return JobOut.of(job)


@router.get("/jobs", response_model=JobList, summary="List jobs, newest first")
async def list_jobs(
    request: Request,
    *,
    state: Annotated[JobState | None, Query()] = None,
    queue: Annotated[str | None, Query(max_length=255)] = None,
    kind: Annotated[str | None, Query(max_length=255)] = None,
    schedule_id: Annotated[str | None, Query(max_length=255)] = None,
    search: Annotated[
        str | None,
        Query(
            max_length=255,
            description="A job id, a unique key, or (with schedule_id) an idempotency key",
        ),
    ] = None,
    limit: Annotated[QueryInt, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> JobList:
    page = await _hg(request).jobs.alist(
        state=state,
        queue=queue,
        kind=kind,
        schedule_id=schedule_id,
        search=search,
        limit=limit,
        cursor=cursor,
    )
    return JobList(jobs=[JobOut.of(job) for job in page.jobs], next_cursor=page.next_cursor)


@router.get(
    "/jobs:count",
    response_model=JobCountsOut,
    summary="Count jobs per state (bounded), with the filters of GET /jobs",
)
async def count_jobs(
    request: Request,
    *,
    queue: Annotated[str | None, Query(max_length=255)] = None,
    kind: Annotated[str | None, Query(max_length=255)] = None,
    schedule_id: Annotated[str | None, Query(max_length=255)] = None,
    search: Annotated[str | None, Query(max_length=255)] = None,
) -> JobCountsOut:
    counts = await _hg(request).jobs.acount(
        queue=queue, kind=kind, schedule_id=schedule_id, search=search
    )
    return JobCountsOut(counts=counts, cap=JOB_COUNT_CAP)


@router.post(
    "/jobs:retry",
    response_model=JobsBulkOut,
    summary="Retry the jobs matching filters (one retryable state; at most 1,000 a call)",
)
async def retry_jobs(request: Request, body: JobsBulkIn) -> JobsBulkOut:
    return JobsBulkOut.of(await _hg(request).jobs.aretry_many(**_bulk_filters(body)))


@router.post(
    "/jobs:cancel",
    response_model=JobsBulkOut,
    summary="Cancel the jobs matching filters (pending or running; at most 1,000 a call)",
)
async def cancel_jobs(request: Request, body: JobsBulkIn) -> JobsBulkOut:
    return JobsBulkOut.of(await _hg(request).jobs.acancel_many(**_bulk_filters(body)))


def _bulk_filters(body: JobsBulkIn) -> dict[str, Any]:
    return {**body.model_dump(), "state": body.state.value}


@router.get("/jobs/{job_id}", response_model=JobOut, summary="Inspect a job and its attempts")
async def get_job(request: Request, job_id: str) -> JobOut:
    return JobOut.of(await _hg(request).jobs.aget(job_id))


@router.post(
    "/jobs/{job_id}/cancel",
    response_model=JobOut,
    summary="Cancel a pending or running job (409 from any other state)",
)
async def cancel_job(request: Request, job_id: str) -> JobOut:
    return JobOut.of(await _hg(request).jobs.acancel(job_id))


@router.post(
    "/jobs/{job_id}/retry",
    response_model=JobOut,
    summary="Run a failed, cancelled or quarantined job again (409 from any other state)",
)
async def retry_job(request: Request, job_id: str) -> JobOut:
    return JobOut.of(await _hg(request).jobs.aretry(job_id))


@router.get("/workers", response_model=WorkersOut, summary="Live workers and the scheduler")
async def list_workers(request: Request) -> WorkersOut:
    def read(hg: Headgate) -> WorkersOut:
        now_ms = hg.clock.now_ms()
        lease = hg.runtime.lease()
        return WorkersOut(
            workers=[WorkerOut.of(worker, now_ms) for worker in hg.runtime.workers()],
            scheduler=None if lease is None else LeaseOut.of(lease),
        )

    return await in_store(request, read, reads=True)


@router.get(
    "/handlers",
    response_model=HandlerList,
    summary="Declared handlers: the queue and defaults enqueue routes each kind by",
)
async def list_handlers(request: Request) -> HandlerList:
    handlers = await in_store(request, lambda hg: hg.runtime.declared_handlers(), reads=True)
    return HandlerList(handlers=[HandlerOut.of(handler) for handler in handlers])


@router.get(
    "/scheduler",
    response_model=SchedulerHealthOut,
    summary="Whether anybody fires the ticks (the scheduler lease and the oldest due schedule)",
)
async def scheduler_health(request: Request) -> SchedulerHealthOut:
    return SchedulerHealthOut.of(
        await in_store(request, lambda hg: hg.runtime.scheduler_health(), reads=True)
    )


@router.get("/quarantine", response_model=QuarantineList, summary="Quarantined fingerprints")
async def list_quarantine(
    request: Request,
    limit: Annotated[QueryInt, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> QuarantineList:
    page = await in_store(request, lambda hg: hg.quarantine.list(limit, cursor), reads=True)
    return QuarantineList(
        entries=[QuarantineOut.of(entry) for entry in page.entries], next_cursor=page.next_cursor
    )


@router.put(
    "/quarantine/{fingerprint}",
    response_model=QuarantineOut,
    summary="Quarantine a fingerprint by hand, with a note",
)
async def quarantine(request: Request, fingerprint: str, body: QuarantineIn) -> QuarantineOut:
    def write(hg: Headgate) -> QuarantineEntry | None:
        hg.quarantine.add(fingerprint, body.note)
        return hg.quarantine.get(fingerprint)

    entry = await in_store(request, write)
    if entry is None:  # released by someone else since this request's write
        raise NotFound(f"fingerprint {fingerprint} was released meanwhile")
    return QuarantineOut.of(entry)


@router.delete(
    "/quarantine/{fingerprint}", status_code=204, summary="Release a quarantined fingerprint"
)
async def release(request: Request, fingerprint: str) -> Response:
    await in_store(request, lambda hg: hg.quarantine.release(fingerprint))
    return Response(status_code=204)


@router.get("/queues", response_model=QueueList, summary="Queues: paused or not, jobs waiting")
async def list_queues(
    request: Request,
    limit: Annotated[QueryInt, Query(ge=1, le=MAX_SHOWN)] = PAGE_SHOWN,
) -> QueueList:
    """The paused queues and the busiest others (most jobs pending and running),
    `limit` in all, by name; `more`: how many were left out."""
    shown = busiest(
        await in_store(request, lambda hg: hg.queues.list(), reads=True), limit, queue_weight
    )
    return QueueList(queues=[QueueOut.of(status) for status in shown.items], more=shown.more)


@router.post(
    "/queues/{queue}/pause",
    response_model=QueueOut,
    summary="Pause a queue: no process claims its jobs until it is resumed (running ones finish)",
)
async def pause_queue(request: Request, queue: str, body: QueuePauseIn | None = None) -> QueueOut:
    note = "" if body is None else body.note
    return QueueOut.of(await in_store(request, lambda hg: hg.queues.pause(queue, note)))


@router.post(
    "/queues/{queue}/resume",
    response_model=QueueOut,
    summary="Resume a paused queue (resuming one that is not paused changes nothing)",
)
async def resume_queue(request: Request, queue: str) -> QueueOut:
    return QueueOut.of(await in_store(request, lambda hg: hg.queues.resume(queue)))


@router.get(
    "/unserved",
    response_model=UnservedList,
    summary="Pending jobs no live worker runs, by queue and kind",
)
async def list_unserved(
    request: Request,
    limit: Annotated[QueryInt, Query(ge=1, le=MAX_SHOWN)] = PAGE_SHOWN,
) -> UnservedList:
    """The `limit` (queue, kind) with the most pending jobs; `more`: how many
    were left out."""
    unserved = await in_store(request, lambda hg: hg.runtime.unserved(), reads=True)
    shown = busiest(unserved, limit, lambda work: work.pending)
    return UnservedList(unserved=[UnservedOut.of(work) for work in shown.items], more=shown.more)


@router.get(
    "/limits", response_model=LimitList, summary="Concurrency limits, with their running jobs"
)
async def list_limits(request: Request) -> LimitList:
    limits = await in_store(request, lambda hg: hg.limits.list(), reads=True)
    return LimitList(limits=[ConcurrencyLimitOut.of(limit) for limit in limits])


@router.put(
    "/limits",
    response_model=ConcurrencyLimitOut,
    summary="Set the fleet-wide limit on running jobs of a scope (queue, kind, partition key)",
)
async def set_limit(request: Request, body: LimitIn) -> ConcurrencyLimitOut:
    status = await in_store(
        request,
        lambda hg: hg.limits.set(
            queue=body.queue, kind=body.kind, partition_key=body.partition_key, limit=body.limit
        ),
    )
    return ConcurrencyLimitOut.of(status)


@router.delete(
    "/limits",
    status_code=204,
    summary="Remove the limit on exactly this scope (404 if it has none)",
)
async def clear_limit(
    request: Request,
    queue: Annotated[str | None, Query()] = None,
    kind: Annotated[str | None, Query()] = None,
    partition_key: Annotated[str | None, Query()] = None,
) -> Response:
    cleared = await in_store(
        request, lambda hg: hg.limits.clear(queue=queue, kind=kind, partition_key=partition_key)
    )
    if not cleared:
        raise NotFound("no limit on that scope")
    return Response(status_code=204)


@router.get(
    "/rate-limits",
    response_model=RateLimitList,
    summary="Rate classes, with their starts in the window ending now",
)
async def list_rate_limits(request: Request) -> RateLimitList:
    rates = await in_store(request, lambda hg: hg.rates.list(), reads=True)
    return RateLimitList(rate_limits=[RateLimitOut.of(rate) for rate in rates])


@router.put(
    "/rate-limits/{rate_class}",
    response_model=RateLimitOut,
    summary="Set a rate class's limit: at most `limit` of its jobs start in any `per_ms`",
)
async def set_rate_limit(request: Request, rate_class: str, body: RateLimitIn) -> RateLimitOut:
    status = await in_store(
        request, lambda hg: hg.rates.set(rate_class, limit=body.limit, per_ms=body.per_ms)
    )
    return RateLimitOut.of(status)


@router.delete(
    "/rate-limits/{rate_class}",
    status_code=204,
    summary="Remove a rate class's limit (404 if it has none)",
)
async def clear_rate_limit(request: Request, rate_class: str) -> Response:
    if not await in_store(request, lambda hg: hg.rates.clear(rate_class)):
        raise NotFound(f"rate class {rate_class!r} has no limit")
    return Response(status_code=204)


@router.get(
    "/activity",
    response_model=ActivityList,
    summary="The per-minute activity roll-up (default: the last three hours)",
)
async def activity(
    request: Request, since_ms: Annotated[QueryInt | None, Query(ge=0, le=MAX_INSTANT_MS)] = None
) -> ActivityList:
    points = await in_store(request, lambda hg: hg.metrics.activity(since_ms), reads=True)
    return ActivityList(points=[ActivityPointOut.of(point) for point in points])


@router.get(
    "/spec-preview", response_model=SpecPreview, summary="Validate a spec and show its next ticks"
)
async def spec_preview(
    request: Request, spec: Annotated[str, Query(max_length=1024)]
) -> SpecPreview:
    hg = _hg(request)
    return preview(spec, hg.clock.now_ms(), hg.config.min_interval_ms)
