"""The HTTP control API, /api/v1: a thin translation to the Headgate object."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response

from headgate._app import JOB_COUNT_CAP, Headgate
from headgate._domain.admission import MAX_STORED_ID_LENGTH
from headgate._domain.lifecycle import JobState
from headgate._domain.options import JOB_OPTION_FIELDS, JobOptions, ScheduleDefinition
from headgate._domain.shown import MAX_SHOWN, PAGE_SHOWN, busiest
from headgate._domain.spec import MAX_INSTANT_MS
from headgate._errors import NotFound, ValidationError
from headgate.web._schemas import (
    ActivityList,
    ActivityPointOut,
    ConcurrencyLimitOut,
    ErrorOut,
    EventList,
    EventOut,
    HandlerList,
    HandlerOut,
    JobCountsOut,
    JobIn,
    JobList,
    JobOut,
    JobsBulkIn,
    JobsBulkOut,
    LeaseOut,
    LimitIn,
    LimitList,
    QuarantineIn,
    QuarantineList,
    QuarantineOut,
    QueueList,
    QueueOut,
    QueuePauseIn,
    RateLimitIn,
    RateLimitList,
    RateLimitOut,
    RunOut,
    ScheduleChangesIn,
    ScheduleIn,
    ScheduleList,
    ScheduleOut,
    SchedulerHealthOut,
    ScheduleRunList,
    ScheduleRunOut,
    SchedulesIn,
    SchedulesPutOut,
    SpecPreview,
    UnservedList,
    UnservedOut,
    UpcomingList,
    UpcomingOut,
    WorkerOut,
    WorkersOut,
    preview,
    queue_weight,
)

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


def _each_query_parameter_once(request: Request) -> None:
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


@router.get(
    "/periodic",
    response_model=ScheduleList,
    summary="List schedules",
)
def list_schedules(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=200)] = 200,
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
    hg = _hg(request)
    page = hg.list_schedules(limit, cursor, search=search, health=health)
    judged = hg.schedules_health(page.schedules)
    return ScheduleList(
        schedules=[ScheduleOut.of(s, judged.get(s.id)) for s in page.schedules],
        next_cursor=page.next_cursor,
    )


@router.put(
    "/periodic/{schedule_id}",
    response_model=ScheduleOut,
    summary="Create or replace a schedule (a full replace: fields left out take their defaults)",
    responses={201: {"model": ScheduleOut, "description": "Created"}},
)
def put_schedule(
    request: Request, response: Response, schedule_id: str, body: ScheduleIn
) -> ScheduleOut:
    definition = ScheduleDefinition.from_fields(body.model_dump())
    result = _hg(request).put_definition(schedule_id, definition)
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
def update_schedule(request: Request, schedule_id: str, body: ScheduleChangesIn) -> ScheduleOut:
    changes = body.model_dump(exclude_unset=True)
    return ScheduleOut.of(_hg(request).update_schedule_fields(schedule_id, changes))


@router.delete(
    "/periodic/{schedule_id}/overrides",
    response_model=ScheduleOut,
    summary="Clear operators' overrides: the schedule becomes what its code declares",
)
def clear_overrides(request: Request, schedule_id: str) -> ScheduleOut:
    return ScheduleOut.of(_hg(request).clear_overrides(schedule_id))


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
def put_schedules(request: Request, response: Response, body: SchedulesIn) -> SchedulesPutOut:
    items = []
    for item in body.schedules:
        fields = item.model_dump()
        items.append({"schedule_id": fields.pop("id"), **fields})
    try:
        result = _hg(request).put_schedules(items)
    except ValidationError as error:  # named as the body names it: `schedules[3].id`
        field = re.sub(r"^(schedules\[\d+\])\.schedule_id$", r"\1.id", error.field)
        raise ValidationError(field, error.rule) from None
    response.status_code = 201 if result.created else 200
    return SchedulesPutOut.of(result.outcomes)


@router.get("/periodic/{schedule_id}", response_model=ScheduleOut, summary="Read a schedule")
def get_schedule(request: Request, schedule_id: str) -> ScheduleOut:
    hg = _hg(request)
    schedule = hg.get_schedule(schedule_id)
    return ScheduleOut.of(schedule, hg.schedules_health([schedule]).get(schedule.id))


@router.get(
    "/periodic/{schedule_id}/runs",
    response_model=ScheduleRunList,
    summary="What became of each run (tick jobs and Enqueue now's), newest first",
)
def schedule_runs(
    request: Request,
    schedule_id: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 30,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> ScheduleRunList:
    """The newest 100 runs are kept, also after the schedule is deleted."""
    page = _hg(request).schedule_runs(schedule_id, limit, cursor)
    return ScheduleRunList(
        runs=[ScheduleRunOut.of(run) for run in page.runs], next_cursor=page.next_cursor
    )


@router.delete(
    "/periodic/{schedule_id}", status_code=204, summary="Delete a schedule (history stays)"
)
def delete_schedule(request: Request, schedule_id: str) -> Response:
    _hg(request).delete_schedule(schedule_id)
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
def run_now(
    request: Request,
    schedule_id: str,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> RunOut:
    if idempotency_key is None:
        raise ValidationError("Idempotency-Key", "header is required")
    result = _hg(request).run_now(schedule_id, _utf8_header("Idempotency-Key", idempotency_key))
    return RunOut(id=result.job_id, replayed=result.replayed)


@router.post(
    "/periodic/{schedule_id}/pause",
    response_model=ScheduleOut,
    summary="Pause a schedule (idempotent; its phase is kept)",
)
def pause_schedule(request: Request, schedule_id: str) -> ScheduleOut:
    return ScheduleOut.of(_hg(request).pause_schedule(schedule_id))


@router.post(
    "/periodic/{schedule_id}/resume",
    response_model=ScheduleOut,
    summary="Resume a schedule (idempotent; missed ticks follow its missed-run policy)",
)
def resume_schedule(request: Request, schedule_id: str) -> ScheduleOut:
    return ScheduleOut.of(_hg(request).resume_schedule(schedule_id))


@router.get(
    "/periodic/{schedule_id}/enqueue-events",
    response_model=EventList,
    summary="Automatic enqueue attempts, newest first",
)
def enqueue_events(
    request: Request,
    schedule_id: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 30,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> EventList:
    page = _hg(request).enqueue_events(schedule_id, limit, cursor)
    return EventList(events=[EventOut.of(e) for e in page.events], next_cursor=page.next_cursor)


@router.get(
    "/periodic/{schedule_id}/upcoming",
    response_model=UpcomingList,
    summary="The next ticks it fires, from its stored next_run_ms, with their jittered instants",
)
def upcoming(
    request: Request,
    schedule_id: str,
    count: Annotated[int, Query(ge=1, le=100)] = 5,
) -> UpcomingList:
    runs = _hg(request).upcoming(schedule_id, count)
    return UpcomingList(
        upcoming=[UpcomingOut(tick_ms=r.tick_ms, due_at_ms=r.due_at_ms) for r in runs]
    )


@router.get(
    "/periodic/{schedule_id}/manual-runs",
    response_model=JobList,
    summary="Jobs this schedule's Enqueue now made, newest first",
)
def manual_runs(
    request: Request,
    schedule_id: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> JobList:
    page = _hg(request).manual_runs(schedule_id, limit, cursor)
    return JobList(jobs=[JobOut.of(job) for job in page.jobs], next_cursor=page.next_cursor)


@router.post("/jobs", status_code=201, response_model=JobOut, summary="Enqueue an ordinary job")
def enqueue(request: Request, body: JobIn) -> JobOut:
    fields = body.model_dump()
    origin = fields["periodic_origin"]
    options = JobOptions(**{name: fields[name] for name in JOB_OPTION_FIELDS})
    job = _hg(request).enqueue_job(fields["kind"], fields["payload"], options, origin)
    return JobOut.of(job)


@router.get("/jobs", response_model=JobList, summary="List jobs, newest first")
def list_jobs(
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
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> JobList:
    page = _hg(request).list_jobs(
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
def count_jobs(
    request: Request,
    *,
    queue: Annotated[str | None, Query(max_length=255)] = None,
    kind: Annotated[str | None, Query(max_length=255)] = None,
    schedule_id: Annotated[str | None, Query(max_length=255)] = None,
    search: Annotated[str | None, Query(max_length=255)] = None,
) -> JobCountsOut:
    counts = _hg(request).count_jobs(queue=queue, kind=kind, schedule_id=schedule_id, search=search)
    return JobCountsOut(counts=counts, cap=JOB_COUNT_CAP)


@router.post(
    "/jobs:retry",
    response_model=JobsBulkOut,
    summary="Retry the jobs matching filters (one retryable state; at most 1,000 a call)",
)
def retry_jobs(request: Request, body: JobsBulkIn) -> JobsBulkOut:
    return JobsBulkOut.of(_hg(request).retry_jobs(**_bulk_filters(body)))


@router.post(
    "/jobs:cancel",
    response_model=JobsBulkOut,
    summary="Cancel the jobs matching filters (pending or running; at most 1,000 a call)",
)
def cancel_jobs(request: Request, body: JobsBulkIn) -> JobsBulkOut:
    return JobsBulkOut.of(_hg(request).cancel_jobs(**_bulk_filters(body)))


def _bulk_filters(body: JobsBulkIn) -> dict[str, Any]:
    return {**body.model_dump(), "state": body.state.value}


@router.get("/jobs/{job_id}", response_model=JobOut, summary="Inspect a job and its attempts")
def get_job(request: Request, job_id: str) -> JobOut:
    return JobOut.of(_hg(request).get_job(job_id))


@router.post(
    "/jobs/{job_id}/cancel",
    response_model=JobOut,
    summary="Cancel a pending or running job (409 from any other state)",
)
def cancel_job(request: Request, job_id: str) -> JobOut:
    return JobOut.of(_hg(request).cancel_job(job_id))


@router.post(
    "/jobs/{job_id}/retry",
    response_model=JobOut,
    summary="Run a failed, cancelled or quarantined job again (409 from any other state)",
)
def retry_job(request: Request, job_id: str) -> JobOut:
    return JobOut.of(_hg(request).retry_job(job_id))


@router.get("/workers", response_model=WorkersOut, summary="Live workers and the scheduler")
def list_workers(request: Request) -> WorkersOut:
    hg = _hg(request)
    now_ms = hg.clock.now_ms()
    lease = hg.lease_status()
    return WorkersOut(
        workers=[WorkerOut.of(worker, now_ms) for worker in hg.workers()],
        scheduler=None if lease is None else LeaseOut.of(lease),
    )


@router.get(
    "/handlers",
    response_model=HandlerList,
    summary="Declared handlers: the queue and defaults enqueue routes each kind by",
)
def list_handlers(request: Request) -> HandlerList:
    return HandlerList(
        handlers=[HandlerOut.of(handler) for handler in _hg(request).declared_handlers()]
    )


@router.get(
    "/scheduler",
    response_model=SchedulerHealthOut,
    summary="Whether anybody fires the ticks (the scheduler lease and the oldest due schedule)",
)
def scheduler_health(request: Request) -> SchedulerHealthOut:
    return SchedulerHealthOut.of(_hg(request).scheduler_health())


@router.get("/quarantine", response_model=QuarantineList, summary="Quarantined fingerprints")
def list_quarantine(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> QuarantineList:
    page = _hg(request).list_quarantine(limit, cursor)
    return QuarantineList(
        entries=[QuarantineOut.of(entry) for entry in page.entries], next_cursor=page.next_cursor
    )


@router.put(
    "/quarantine/{fingerprint}",
    response_model=QuarantineOut,
    summary="Quarantine a fingerprint by hand, with a note",
)
def quarantine(request: Request, fingerprint: str, body: QuarantineIn) -> QuarantineOut:
    hg = _hg(request)
    hg.quarantine(fingerprint, body.note)
    entry = hg.quarantine_entry(fingerprint)
    if entry is None:  # released by someone else since this request's write
        raise NotFound(f"fingerprint {fingerprint} was released meanwhile")
    return QuarantineOut.of(entry)


@router.delete(
    "/quarantine/{fingerprint}", status_code=204, summary="Release a quarantined fingerprint"
)
def release(request: Request, fingerprint: str) -> Response:
    _hg(request).release(fingerprint)
    return Response(status_code=204)


@router.get("/queues", response_model=QueueList, summary="Queues: paused or not, jobs waiting")
def list_queues(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=MAX_SHOWN)] = PAGE_SHOWN,
) -> QueueList:
    """The paused queues and the busiest others (most jobs pending and running),
    `limit` in all, by name; `more`: how many were left out."""
    shown = busiest(_hg(request).queues(), limit, queue_weight)
    return QueueList(queues=[QueueOut.of(status) for status in shown.items], more=shown.more)


@router.post(
    "/queues/{queue}/pause",
    response_model=QueueOut,
    summary="Pause a queue: no process claims its jobs until it is resumed (running ones finish)",
)
def pause_queue(request: Request, queue: str, body: QueuePauseIn | None = None) -> QueueOut:
    return QueueOut.of(_hg(request).pause_queue(queue, "" if body is None else body.note))


@router.post(
    "/queues/{queue}/resume",
    response_model=QueueOut,
    summary="Resume a paused queue (resuming one that is not paused changes nothing)",
)
def resume_queue(request: Request, queue: str) -> QueueOut:
    return QueueOut.of(_hg(request).resume_queue(queue))


@router.get(
    "/unserved",
    response_model=UnservedList,
    summary="Pending jobs no live worker runs, by queue and kind",
)
def list_unserved(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=MAX_SHOWN)] = PAGE_SHOWN,
) -> UnservedList:
    """The `limit` (queue, kind) with the most pending jobs; `more`: how many
    were left out."""
    shown = busiest(_hg(request).unserved(), limit, lambda work: work.pending)
    return UnservedList(unserved=[UnservedOut.of(work) for work in shown.items], more=shown.more)


@router.get(
    "/limits", response_model=LimitList, summary="Concurrency limits, with their running jobs"
)
def list_limits(request: Request) -> LimitList:
    return LimitList(limits=[ConcurrencyLimitOut.of(limit) for limit in _hg(request).limits()])


@router.put(
    "/limits",
    response_model=ConcurrencyLimitOut,
    summary="Set the fleet-wide limit on running jobs of a scope (queue, kind, partition key)",
)
def set_limit(request: Request, body: LimitIn) -> ConcurrencyLimitOut:
    status = _hg(request).set_limit(
        queue=body.queue, kind=body.kind, partition_key=body.partition_key, limit=body.limit
    )
    return ConcurrencyLimitOut.of(status)


@router.delete(
    "/limits",
    status_code=204,
    summary="Remove the limit on exactly this scope (404 if it has none)",
)
def clear_limit(
    request: Request,
    queue: Annotated[str | None, Query()] = None,
    kind: Annotated[str | None, Query()] = None,
    partition_key: Annotated[str | None, Query()] = None,
) -> Response:
    if not _hg(request).clear_limit(queue=queue, kind=kind, partition_key=partition_key):
        raise NotFound("no limit on that scope")
    return Response(status_code=204)


@router.get(
    "/rate-limits",
    response_model=RateLimitList,
    summary="Rate classes, with their starts in the window ending now",
)
def list_rate_limits(request: Request) -> RateLimitList:
    return RateLimitList(rate_limits=[RateLimitOut.of(rate) for rate in _hg(request).rate_limits()])


@router.put(
    "/rate-limits/{rate_class}",
    response_model=RateLimitOut,
    summary="Set a rate class's limit: at most `limit` of its jobs start in any `per_ms`",
)
def set_rate_limit(request: Request, rate_class: str, body: RateLimitIn) -> RateLimitOut:
    status = _hg(request).set_rate_limit(rate_class, limit=body.limit, per_ms=body.per_ms)
    return RateLimitOut.of(status)


@router.delete(
    "/rate-limits/{rate_class}",
    status_code=204,
    summary="Remove a rate class's limit (404 if it has none)",
)
def clear_rate_limit(request: Request, rate_class: str) -> Response:
    if not _hg(request).clear_rate_limit(rate_class):
        raise NotFound(f"rate class {rate_class!r} has no limit")
    return Response(status_code=204)


@router.get(
    "/activity",
    response_model=ActivityList,
    summary="The per-minute activity roll-up (default: the last three hours)",
)
def activity(
    request: Request, since_ms: Annotated[int | None, Query(ge=0, le=MAX_INSTANT_MS)] = None
) -> ActivityList:
    points = _hg(request).activity(since_ms)
    return ActivityList(points=[ActivityPointOut.of(point) for point in points])


@router.get(
    "/spec-preview", response_model=SpecPreview, summary="Validate a spec and show its next ticks"
)
def spec_preview(request: Request, spec: Annotated[str, Query(max_length=1024)]) -> SpecPreview:
    hg = _hg(request)
    return preview(spec, hg.clock.now_ms(), hg.config.min_interval_ms)
