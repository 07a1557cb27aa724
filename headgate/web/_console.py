"""The web console: server-rendered pages over the same Headgate object as the API."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.templating import Jinja2Templates

from headgate._app import Headgate
from headgate._domain.describe import describe, missed_run_label
from headgate._domain.spec import MAX_INSTANT_MS, InvalidSpec, parse_spec
from headgate._errors import NotFound, ValidationError
from headgate._model import Schedule
from headgate.web._auth import COOKIE, token_matches

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))
router = APIRouter(include_in_schema=False)


def _hg(request: Request) -> Headgate:
    hg: Headgate = request.app.state.headgate
    return hg


def format_ms(ms: int | None, zone: str = "UTC") -> str:
    if ms is None:
        return "—"
    if not 0 <= ms <= MAX_INSTANT_MS:  # only a job stored before the API enforced the range
        return f"{ms} (epoch ms, beyond the calendar)"
    moment = datetime.fromtimestamp(ms / 1000, UTC).astimezone(ZoneInfo(zone))
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z")


def _row(schedule: Schedule) -> dict[str, Any]:
    try:
        spec = parse_spec(schedule.spec)
        description, zone = describe(spec), spec.zone_name
    except InvalidSpec:
        description, zone = "invalid spec", "UTC"
    return {
        "schedule": schedule,
        "description": description,
        "zone": zone,
        "next_utc": format_ms(schedule.next_run_ms),
        "next_local": format_ms(schedule.next_run_ms, zone) if zone != "UTC" else None,
        "policy": missed_run_label(schedule.on_missed, schedule.backfill_limit),
        "payload_json": json.dumps(schedule.payload, indent=2),
    }


def _page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    context["base"] = request.scope.get("root_path", "")
    context["format_ms"] = format_ms
    return TEMPLATES.TemplateResponse(request, template, context, status_code=status)


@router.get("/")
def index(request: Request, cursor: Annotated[str | None, Query()] = None) -> HTMLResponse:
    hg = _hg(request)
    try:
        page = hg.list_schedules(50, cursor)
    except ValidationError as error:
        return _page(request, "problem.html", 422, message=str(error))
    return _page(
        request,
        "index.html",
        lease=hg.lease_status(),
        rows=[_row(s) for s in page.schedules],
        next_cursor=page.next_cursor,
    )


@router.get("/schedules/new")
def new_schedule(request: Request) -> HTMLResponse:
    return _page(request, "form.html", row=None)


@router.get("/schedules/{schedule_id}")
def schedule_page(
    request: Request, schedule_id: str, cursor: Annotated[str | None, Query()] = None
) -> HTMLResponse:
    hg = _hg(request)
    try:
        schedule = hg.get_schedule(schedule_id)
    except NotFound:
        return _page(request, "missing.html", 404, what=f"schedule {schedule_id}")
    try:
        events = hg.enqueue_events(schedule_id, 30, cursor)
    except ValidationError as error:
        return _page(request, "problem.html", 422, message=str(error))
    upcoming = hg.upcoming(schedule_id, 5)
    return _page(request, "schedule.html", row=_row(schedule), events=events, upcoming=upcoming)


@router.get("/schedules/{schedule_id}/edit")
def edit_schedule(request: Request, schedule_id: str) -> HTMLResponse:
    try:
        schedule = _hg(request).get_schedule(schedule_id)
    except NotFound:
        return _page(request, "missing.html", 404, what=f"schedule {schedule_id}")
    return _page(request, "form.html", row=_row(schedule))


@router.get("/jobs/{job_id}")
def job_page(request: Request, job_id: str) -> HTMLResponse:
    try:
        job = _hg(request).get_job(job_id)
    except NotFound:
        return _page(request, "missing.html", 404, what=f"job {job_id}")
    return _page(request, "job.html", job=job, payload_json=json.dumps(job.payload, indent=2))


@router.get("/login")
def login_form(request: Request) -> HTMLResponse:
    return _page(request, "login.html")


@router.post("/login")
async def login(request: Request) -> Response:
    expected = request.app.state.api_token
    try:
        offered = (await request.json()).get("token")
    except (ValueError, AttributeError, RecursionError):
        offered = None
    if expected is None or not token_matches(
        expected, offered if isinstance(offered, str) else None
    ):
        return JSONResponse({"error": "token: wrong or missing"}, status_code=401)
    response = JSONResponse({"ok": True})
    # The cookie carries the token: Secure whenever the login came over HTTPS,
    # and sent only to this app (not to the rest of a host that mounts it).
    response.set_cookie(
        COOKIE,
        expected,
        path=request.scope.get("root_path") or "/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response
