"""The HTTP control API, /api/v1: a thin translation to the Headgate object."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request, Response

from headgate._app import Headgate
from headgate._commands import validate_definition
from headgate._errors import ValidationError
from headgate.web._schemas import (
    ErrorOut,
    EventList,
    EventOut,
    JobIn,
    JobOut,
    RunOut,
    ScheduleIn,
    ScheduleList,
    ScheduleOut,
    SpecPreview,
    preview,
)

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": text}
    for code, text in {
        400: "Malformed request",
        401: "Missing or wrong token (when HEADGATE_API_TOKEN is set)",
        404: "No such schedule or job",
        409: "Conflict with stored state",
        413: "Body over 1 MiB",
        415: "Body is not JSON",
        422: "Invalid input: the message names the field and the rule",
        429: "The queue is full (backpressure)",
        503: "The store is unavailable",
    }.items()
}

router = APIRouter(prefix="/api/v1", responses=ERRORS)


def _hg(request: Request) -> Headgate:
    hg: Headgate = request.app.state.headgate
    return hg


@router.get(
    "/periodic",
    response_model=ScheduleList,
    response_model_exclude_unset=True,
    summary="List schedules",
)
def list_schedules(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=200)] = 200,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> ScheduleList:
    page = _hg(request).list_schedules(limit, cursor)
    return ScheduleList(
        schedules=[ScheduleOut.of(s) for s in page.schedules], next_cursor=page.next_cursor
    )


@router.put(
    "/periodic/{schedule_id}",
    response_model=ScheduleOut,
    response_model_exclude_unset=True,
    summary="Create or replace a schedule",
    responses={201: {"model": ScheduleOut, "description": "Created"}},
)
def put_schedule(
    request: Request, response: Response, schedule_id: str, body: ScheduleIn
) -> ScheduleOut:
    hg = _hg(request)
    definition = validate_definition(schedule_id, limits=hg.config.limits, **body.model_dump())
    schedule, created = hg._upsert_schedule(definition)
    response.status_code = 201 if created else 200
    return ScheduleOut.of(schedule)


@router.get(
    "/periodic/{schedule_id}",
    response_model=ScheduleOut,
    response_model_exclude_unset=True,
    summary="Read a schedule",
)
def get_schedule(
    request: Request,
    schedule_id: str,
    include: Annotated[Literal["payload"] | None, Query()] = None,
) -> ScheduleOut:
    return ScheduleOut.of(
        _hg(request).get_schedule(schedule_id), include_payload=include == "payload"
    )


@router.delete(
    "/periodic/{schedule_id}", status_code=204, summary="Delete a schedule (history stays)"
)
def delete_schedule(request: Request, schedule_id: str) -> Response:
    _hg(request).delete_schedule(schedule_id)
    return Response(status_code=204)


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
    result = _hg(request).run_now(schedule_id, idempotency_key)
    return RunOut(id=result.job_id, replayed=result.replayed)


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


@router.post("/jobs", status_code=201, response_model=JobOut, summary="Enqueue an ordinary job")
def enqueue(request: Request, body: JobIn) -> JobOut:
    origin = body.periodic_origin.model_dump() if body.periodic_origin is not None else None
    job = _hg(request).enqueue(
        body.kind,
        body.payload,
        queue=body.queue,
        unique_key=body.unique_key,
        periodic_origin=origin,
    )
    return JobOut.of(job)


@router.get("/jobs/{job_id}", response_model=JobOut, summary="Inspect a job")
def get_job(request: Request, job_id: str) -> JobOut:
    return JobOut.of(_hg(request).get_job(job_id))


@router.get(
    "/spec-preview", response_model=SpecPreview, summary="Validate a spec and show its next ticks"
)
def spec_preview(request: Request, spec: Annotated[str, Query(max_length=1024)]) -> SpecPreview:
    return preview(spec, _hg(request).clock.now_ms())
