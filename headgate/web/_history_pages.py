"""The console's pages of the past: a schedule or a job as of an instant (the time
picker on their pages, a GET form: it changes nothing), and a schedule's
definition changes with who made them."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from headgate._domain.read_fields import JOB_READ
from headgate._errors import NotFound, ValidationError
from headgate.web._console import _hg, _page, _problem, _row, format_ms

router = APIRouter(include_in_schema=False)


def instant_value(ms: int | None) -> str:
    """An instant as the time picker (datetime-local, read as UTC) shows it."""
    if ms is None:
        return ""
    return format_ms(ms - ms % 1000)[:19].replace(" ", "T")


@router.get("/schedules/{schedule_id}/as-of")
def schedule_as_of_page(
    request: Request, schedule_id: str, as_of: Annotated[str, Query()] = ""
) -> HTMLResponse:
    hg = _hg(request)
    try:
        found = hg.schedules.as_of(schedule_id, as_of)
    except NotFound:
        return _page(request, "missing.html", 404, what=f"schedule {schedule_id}")
    except ValidationError as error:
        return _problem(request, error)
    return _page(
        request,
        "schedule_as_of.html",
        schedule_id=schedule_id,
        as_of=found,
        row=None if found.schedule is None else _row(found.schedule),
        picked=instant_value(found.as_of_ms),
    )


@router.get("/schedules/{schedule_id}/changes")
def schedule_changes_page(
    request: Request,
    schedule_id: str,
    since: Annotated[str, Query()] = "",
    until: Annotated[str, Query()] = "",
) -> HTMLResponse:
    hg = _hg(request)
    try:
        changes = hg.schedules.changes(schedule_id, since=since or None, until=until or None)
    except NotFound:
        return _page(request, "missing.html", 404, what=f"schedule {schedule_id}")
    except ValidationError as error:
        return _problem(request, error)
    return _page(
        request,
        "schedule_changes.html",
        schedule_id=schedule_id,
        changes=changes,
        since_value=instant_value(changes.since_ms) if since else "",
        until_value=instant_value(changes.until_ms) if until else "",
    )


@router.get("/jobs/{job_id}/as-of")
def job_as_of_page(
    request: Request, job_id: str, as_of: Annotated[str, Query()] = ""
) -> HTMLResponse:
    hg = _hg(request)
    try:
        found = hg.jobs.as_of(job_id, as_of)
    except NotFound:
        return _page(request, "missing.html", 404, what=f"job {job_id}")
    except ValidationError as error:
        return _problem(request, error)
    job = found.job
    return _page(
        request,
        "job_as_of.html",
        fields=JOB_READ,
        job_id=job_id,
        as_of=found,
        job=job,
        payload_json="" if job is None else json.dumps(job.payload, indent=2, ensure_ascii=False),
        picked=instant_value(found.as_of_ms),
    )
