"""/api/v1/schedules: schedules, their runs, health, tick attempts and Enqueue now."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import Header, Query, Request, Response

from headgate._app import Headgate
from headgate._domain.admission import MAX_STORED_ID_LENGTH
from headgate._domain.options import ScheduleDefinition
from headgate._errors import ValidationError
from headgate._operator import operator_of
from headgate._wire.jobs import JobList, JobOut
from headgate._wire.schedules import (
    EnqueueNowOut,
    EventList,
    EventOut,
    ScheduleChangesIn,
    ScheduleIn,
    ScheduleList,
    ScheduleOut,
    ScheduleRunList,
    ScheduleRunOut,
    SchedulesIn,
    SchedulesPutOut,
    UpcomingList,
    UpcomingOut,
)
from headgate.web._api import api_router, headgate_of, in_store
from headgate.web._params import QueryInt

router = api_router()


@router.get(
    "/schedules",
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
    "/schedules/{schedule_id}",
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
    "/schedules/{schedule_id}",
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
    "/schedules/{schedule_id}/overrides",
    response_model=ScheduleOut,
    summary="Clear operators' overrides: the schedule becomes what its code declares",
)
async def clear_overrides(request: Request, schedule_id: str) -> ScheduleOut:
    return ScheduleOut.of(
        await in_store(request, lambda hg: hg.schedules.clear_overrides(schedule_id))
    )


@router.post(
    "/schedules:bulk",
    response_model=SchedulesPutOut,
    summary="Create or replace many schedules (201 if any was created, else 200)",
    description=(
        "Every item is checked before any is written: a bad one is a 422 naming it "
        '(`{"error": "schedules[3].spec: ..."}`), and so is an id given twice; nothing is '
        "written then. The rest follows PUT /schedules/{id}, per item. Written 500 per "
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


@router.get("/schedules/{schedule_id}", response_model=ScheduleOut, summary="Read a schedule")
async def get_schedule(request: Request, schedule_id: str) -> ScheduleOut:
    def read(hg: Headgate) -> ScheduleOut:
        schedule = hg.schedules.get(schedule_id)
        return ScheduleOut.of(schedule, hg.schedules.health_of([schedule]).get(schedule.id))

    return await in_store(request, read, reads=True)


@router.get(
    "/schedules/{schedule_id}/runs",
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
    page = await headgate_of(request).schedules.aruns(schedule_id, limit, cursor)
    return ScheduleRunList(
        runs=[ScheduleRunOut.of(run) for run in page.runs], next_cursor=page.next_cursor
    )


@router.delete(
    "/schedules/{schedule_id}", status_code=204, summary="Delete a schedule (history stays)"
)
async def delete_schedule(request: Request, schedule_id: str) -> Response:
    await headgate_of(request).schedules.adelete(schedule_id)
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
    "/schedules/{schedule_id}/enqueue-now",
    status_code=202,
    response_model=EnqueueNowOut,
    summary="Enqueue now",
)
async def enqueue_now(
    request: Request,
    schedule_id: str,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> EnqueueNowOut:
    if idempotency_key is None:
        raise ValidationError("Idempotency-Key", "header is required")
    key = _utf8_header("Idempotency-Key", idempotency_key)
    result = await headgate_of(request).schedules.aenqueue_now(schedule_id, key)
    return EnqueueNowOut(id=result.job_id, replayed=result.replayed)


@router.post(
    "/schedules/{schedule_id}/pause",
    response_model=ScheduleOut,
    summary="Pause a schedule (idempotent; its phase is kept)",
)
async def pause_schedule(request: Request, schedule_id: str) -> ScheduleOut:
    return ScheduleOut.of(await headgate_of(request).schedules.apause(schedule_id))


@router.post(
    "/schedules/{schedule_id}/resume",
    response_model=ScheduleOut,
    summary="Resume a schedule (idempotent; missed ticks follow its missed-run policy)",
)
async def resume_schedule(request: Request, schedule_id: str) -> ScheduleOut:
    return ScheduleOut.of(await headgate_of(request).schedules.aresume(schedule_id))


@router.get(
    "/schedules/{schedule_id}/enqueue-events",
    response_model=EventList,
    summary="Automatic enqueue attempts, newest first",
)
async def enqueue_events(
    request: Request,
    schedule_id: str,
    limit: Annotated[QueryInt, Query(ge=1, le=100)] = 30,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> EventList:
    page = await headgate_of(request).schedules.aenqueue_events(schedule_id, limit, cursor)
    return EventList(events=[EventOut.of(e) for e in page.events], next_cursor=page.next_cursor)


@router.get(
    "/schedules/{schedule_id}/upcoming",
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
    "/schedules/{schedule_id}/manual-runs",
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
