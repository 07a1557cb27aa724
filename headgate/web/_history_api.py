"""The API's reads of the past: a schedule or a job as of an instant, and a
schedule's definition changes between two instants (`hg.schedules.as_of`,
`changes`, `hg.jobs.as_of`)."""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Depends, Query, Request

from headgate._wire.history import JobAsOfOut, ScheduleAsOfOut, ScheduleChangesOut
from headgate.web._api import ERRORS, _each_query_parameter_once, in_store
from headgate.web._params import QueryInt

INSTANT_TEXT: Final = 64
_INSTANT = "Epoch milliseconds, or ISO-8601 with a UTC offset (without one: UTC)"

router = APIRouter(
    prefix="/api/v1", responses=ERRORS, dependencies=[Depends(_each_query_parameter_once)]
)


@router.get(
    "/schedules/{schedule_id}/as-of",
    response_model=ScheduleAsOfOut,
    summary="A schedule as it stood at a past instant",
)
async def schedule_as_of(
    request: Request,
    schedule_id: str,
    as_of: Annotated[str, Query(max_length=INSTANT_TEXT, description=_INSTANT)],
) -> ScheduleAsOfOut:
    """Folded from its events up to that instant: its definition and timing then,
    and who made the change in force. `state` says when it did not exist yet, or
    when the instant is before the oldest event compaction kept."""
    return ScheduleAsOfOut.of(
        await in_store(request, lambda hg: hg.schedules.as_of(schedule_id, as_of), reads=True)
    )


@router.get(
    "/schedules/{schedule_id}/changes",
    response_model=ScheduleChangesOut,
    summary="A schedule's definition changes between two instants, with who made them",
)
async def schedule_changes(
    request: Request,
    schedule_id: str,
    since: Annotated[
        str | None, Query(max_length=INSTANT_TEXT, description=f"{_INSTANT}; default: the start")
    ] = None,
    until: Annotated[
        str | None, Query(max_length=INSTANT_TEXT, description=f"{_INSTANT}; default: now")
    ] = None,
    limit: Annotated[QueryInt, Query(ge=1, le=100)] = 100,
) -> ScheduleChangesOut:
    """Oldest first, each a diff from the definition before it; a payload shows
    its keys and which of them changed, never a value."""
    changes = await in_store(
        request,
        lambda hg: hg.schedules.changes(schedule_id, since=since, until=until, limit=limit),
        reads=True,
    )
    return ScheduleChangesOut.of(changes)


@router.get(
    "/jobs/{job_id}/as-of",
    response_model=JobAsOfOut,
    summary="A job as it stood at a past instant",
)
async def job_as_of(
    request: Request,
    job_id: str,
    as_of: Annotated[str, Query(max_length=INSTANT_TEXT, description=_INSTANT)],
) -> JobAsOfOut:
    """Folded from its events up to that instant: its state, attempts and errors then."""
    return JobAsOfOut.of(
        await in_store(request, lambda hg: hg.jobs.as_of(job_id, as_of), reads=True)
    )
