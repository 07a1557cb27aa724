"""The web console: server-rendered pages over the same Headgate object as the API."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from typing import Annotated, Any, Final
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from headgate._app import JOB_COUNT_CAP, Headgate
from headgate._domain.activity import MINUTE_MS, SHOWN_MS, minute_of
from headgate._domain.describe import describe_in_words, missed_run_label, overlap_label
from headgate._domain.lifecycle import BULK_MAX, JobAction, JobState, allows
from headgate._domain.read_fields import JOB_READ, SCHEDULE_READ, ReadField, Shape
from headgate._domain.shown import BANNER_SHOWN, PAGE_SHOWN, Shown, busiest, queue_weight
from headgate._domain.spec import MAX_INSTANT_MS, InvalidSpec, ScheduleSpec, parse_spec
from headgate._errors import NotFound, StoreError, ValidationError
from headgate._model import ConcurrencyLimitStatus, EnqueueEvent, Schedule
from headgate._operator import operator_of
from headgate._run_reads import HEALTH_STATES
from headgate.web import _templates
from headgate.web._charts import HEIGHT, PLOT, WIDTH, charts, fitted_start
from headgate.web._form import form_fields

router = APIRouter(include_in_schema=False)


def _hg(request: Request) -> Headgate:
    hg: Headgate = request.app.state.headgate
    return hg


def format_ms(ms: int | None, zone: str = "UTC") -> str:
    if ms is None:
        return "—"
    if not 0 <= ms <= MAX_INSTANT_MS:  # only a job stored before the API enforced the range
        return f"{ms} (epoch ms, beyond the calendar)"
    moment = datetime.fromtimestamp(ms // 1000, UTC).astimezone(ZoneInfo(zone))
    fraction = f".{ms % 1000:03}" if ms % 1000 else ""  # an @every:1500 tick's .500
    return f"{moment:%Y-%m-%d %H:%M:%S}{fraction} {moment:%Z}"


def shown(field: ReadField, value: object) -> str:
    """A read's field for an operator, by its shape (`JOB_READ`, `SCHEDULE_READ`)."""
    if value is None or value in ((), []):
        return "—"
    if field.shape is Shape.INSTANT and isinstance(value, int):
        return format_ms(value)
    if field.shape is Shape.DURATION and isinstance(value, int):
        return format_duration(value)
    if field.shape is Shape.FLAG:
        return "yes" if value else "no"
    if field.shape is Shape.JSON:
        return _json(value)
    if field.shape is Shape.WORDS and isinstance(value, tuple | list):
        return "; ".join(str(item) for item in value)
    return str(value)


def format_duration(ms: int | None) -> str:
    """A span as an operator reads it: "450 ms", "12 s", "3 min 5 s", "2 h 10 min"."""
    if ms is None:
        return "—"
    if ms < 1_000:
        return f"{ms} ms"
    seconds = ms // 1_000
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _row(schedule: Schedule) -> dict[str, Any]:
    try:
        spec: ScheduleSpec | None = parse_spec(schedule.spec)
    except InvalidSpec:
        spec = None
    zone = spec.zone_name if spec else "UTC"
    return {
        "schedule": schedule,
        "spec": spec,
        "description": describe_in_words(spec) if spec else "invalid spec",
        "zone": zone,
        "next_utc": format_ms(schedule.next_run_ms),
        "next_local": format_ms(schedule.next_run_ms, zone) if zone != "UTC" else None,
        "policy": missed_run_label(schedule.on_missed, schedule.backfill_max),
        "overlap": overlap_label(schedule.overlap),
        "payload_json": _json(schedule.payload),
    }


@dataclass(frozen=True)
class Gap:
    """Ticks of the spec between two neighbouring history records that have no
    record of their own: the missed-run policy merged them (downtime, a pause)."""

    after_ms: int
    before_ms: int
    missed: int
    """How many, counted up to GAP_COUNTED."""

    @property
    def missed_text(self) -> str:
        if self.missed >= GAP_COUNTED:
            return f"{GAP_COUNTED} or more ticks"
        return "1 tick" if self.missed == 1 else f"{self.missed} ticks"


GAP_COUNTED: Final = 20


def _with_gaps(spec: ScheduleSpec | None, events: list[EnqueueEvent]) -> list[EnqueueEvent | Gap]:
    """The history (newest first) with a Gap between records whose ticks are
    more than one tick of the spec apart."""
    rows: list[EnqueueEvent | Gap] = []
    for newer, older in pairwise(events):
        rows.append(newer)
        missed = 0 if spec is None else _ticks_between(spec, older.tick_ms, newer.tick_ms)
        if missed:
            rows.append(Gap(older.tick_ms, newer.tick_ms, missed))
    rows.extend(events[-1:])
    return rows


def _ticks_between(spec: ScheduleSpec, after_ms: int, before_ms: int) -> int:
    missed, tick = 0, after_ms
    try:
        while missed < GAP_COUNTED:
            tick = spec.next_tick_ms(tick)
            if tick >= before_ms:
                break
            missed += 1
    except (InvalidSpec, ValueError):  # past the calendar: nothing more to count
        pass
    return missed


def _page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A console page, with its banners: pending work no live worker runs (its
    busiest lines, and how many more: a client makes a line per new queue), and
    schedules due while nobody fires the ticks."""
    hg = _hg(request)
    try:
        unserved = busiest(hg.runtime.unserved(), BANNER_SHOWN, lambda work: work.pending)
        scheduler = hg.runtime.scheduler_health()
    except StoreError:  # the page itself says what the store answered
        unserved, scheduler = Shown([], 0), None
    return _templates.page(
        request,
        template,
        status,
        format_ms=format_ms,
        format_duration=format_duration,
        shown=shown,
        unserved=unserved.items,
        unserved_more=unserved.more,
        scheduler_problem=None
        if scheduler is None or scheduler.state == "ok"
        else scheduler.message,
        **context,
    )


def _problem(request: Request, error: ValidationError) -> HTMLResponse:
    return _page(request, "problem.html", 422, message=str(error))


SCHEDULES_SHOWN: Final = 50


@router.get("/")
def index(
    request: Request,
    cursor: Annotated[str | None, Query()] = None,
    search: Annotated[str, Query()] = "",
    health: Annotated[str, Query()] = "",
) -> HTMLResponse:
    """Schedules by id, a page at a time, each with its health and last run;
    `search` keeps those whose id starts with it (a range of the store's index,
    so it stays quick among many), `health` those in that state."""
    hg = _hg(request)
    wanted = search or None
    try:
        page = hg.schedules.list(SCHEDULES_SHOWN, cursor or None, search=wanted, health=health)
        total = operator_of(hg).count_schedules(search=wanted, health=health)
    except ValidationError as error:
        return _problem(request, error)
    judged = hg.schedules.health_of(page.schedules)
    searched = {name: value for name, value in (("search", search), ("health", health)) if value}
    next_query = urlencode({**searched, "cursor": page.next_cursor}) if page.next_cursor else None
    return _page(
        request,
        "index.html",
        lease=hg.runtime.lease(),
        rows=[{**_row(s), "health": judged[s.id]} for s in page.schedules],
        search=search,
        health=health,
        health_states=HEALTH_STATES,
        total=total,
        first_query=urlencode(searched),
        next_query=next_query,
        paged=bool(cursor),
    )


@router.get("/schedules/new")
def new_schedule(request: Request) -> HTMLResponse:
    return _page(request, "form.html", row=None, fields=form_fields(None))


RUNS_SHOWN: Final = 20


@router.get("/schedules/{schedule_id}")
def schedule_page(
    request: Request,
    schedule_id: str,
    cursor: Annotated[str | None, Query()] = None,
    runs_cursor: Annotated[str | None, Query()] = None,
) -> HTMLResponse:
    hg = _hg(request)
    deleted = False
    try:
        schedule = hg.schedules.get(schedule_id)
    except NotFound:
        found = hg.schedules.deleted(schedule_id)
        if found is None:
            return _page(request, "missing.html", 404, what=f"schedule {schedule_id}")
        schedule, deleted = found, True
    try:
        events = hg.schedules.enqueue_events(schedule_id, 30, cursor)
        runs = hg.schedules.runs(schedule_id, RUNS_SHOWN, runs_cursor)
    except ValidationError as error:
        return _problem(request, error)
    row = _row(schedule)
    fingerprint = hg.quarantine.fingerprint(schedule.kind, schedule.payload)
    return _page(
        request,
        "schedule.html",
        row=row,
        fields=SCHEDULE_READ,
        deleted=deleted,
        fingerprint=fingerprint,
        quarantined=None if deleted else hg.quarantine.get(fingerprint),
        history=_with_gaps(row["spec"], events.events),
        health=None if deleted else hg.schedules.health_of([schedule])[schedule.id],
        runs=runs.runs,
        runs_cursor=runs.next_cursor,
        runs_paged=runs_cursor is not None,
        next_cursor=events.next_cursor,
        newest=cursor is None,
        upcoming=[] if deleted else hg.schedules.upcoming(schedule_id, 5),
    )


@router.get("/schedules/{schedule_id}/edit")
def edit_schedule(request: Request, schedule_id: str) -> HTMLResponse:
    try:
        schedule = _hg(request).schedules.get(schedule_id)
    except NotFound:
        return _page(request, "missing.html", 404, what=f"schedule {schedule_id}")
    return _page(request, "form.html", row=_row(schedule), fields=form_fields(schedule))


JOB_STATES: Final = tuple(state.value for state in JobState)


JOBS_SHOWN: Final = 50
BULK_ACTIONS: Final = {
    state: [action for action in (JobAction.RETRY, JobAction.CANCEL) if allows(action, state)]
    for state in JOB_STATES
}
"""The bulk actions a state's tab offers over its filtered jobs."""


@router.get("/jobs")
def jobs_page(
    request: Request,
    *,
    state: Annotated[str, Query()] = "",
    queue: Annotated[str, Query()] = "",
    kind: Annotated[str, Query()] = "",
    schedule_id: Annotated[str, Query()] = "",
    search: Annotated[str, Query()] = "",
    cursor: Annotated[str | None, Query()] = None,
) -> HTMLResponse:
    """Jobs, newest first, under a tab per state with its count (bounded); an
    empty filter field means any. The search box finds a job by id, the jobs of a
    unique key, and within a schedule an Enqueue now's idempotency key."""
    hg = _hg(request)
    filters = {
        "state": state,
        "queue": queue,
        "kind": kind,
        "schedule_id": schedule_id,
        "search": search,
    }
    chosen = {name: value for name, value in filters.items() if value}
    unstated = {name: value for name, value in chosen.items() if name != "state"}
    shown: dict[str, Any] = {
        "filters": filters,
        "states": JOB_STATES,
        "tab_query": lambda tab: urlencode({**unstated, **({"state": tab} if tab else {})}),
        "bulk_filters": json.dumps(chosen),
        "bulk_actions": BULK_ACTIONS.get(state, []),
        "bulk_max": BULK_MAX,
        "count_cap": JOB_COUNT_CAP,
    }
    try:
        page = hg.jobs.list(**chosen, limit=JOBS_SHOWN, cursor=cursor or None)
        counts = hg.jobs.count(**unstated)
    except ValidationError as error:
        return _page(
            request, "jobs.html", 422, **shown, jobs=[], counts=None, latest={}, error=str(error)
        )
    next_query = urlencode({**chosen, "cursor": page.next_cursor}) if page.next_cursor else None
    return _page(
        request,
        "jobs.html",
        **shown,
        jobs=page.jobs,
        counts=counts,
        total=sum(counts.values()),
        latest=hg.jobs.latest_attempts([job.id for job in page.jobs]),
        now_ms=hg.clock.now_ms(),
        first_query=urlencode(chosen),
        next_query=next_query,
        paged=bool(cursor),
    )


@router.get("/jobs/{job_id}")
def job_page(request: Request, job_id: str) -> HTMLResponse:
    hg = _hg(request)
    try:
        job = hg.jobs.get(job_id)
    except NotFound:
        return _page(request, "missing.html", 404, what=f"job {job_id}")
    return _page(
        request,
        "job.html",
        job=job,
        fields=JOB_READ,
        limits=operator_of(hg).job_settings(job),
        quarantined=hg.quarantine.get(job.fingerprint),
        queue=operator_of(hg).queue_status(job.queue),
        quarantine_body=json.dumps({"note": f"by hand, from job {job.id}"}),
        payload_json=_json(job.payload),
        result_json=_json(job.result),
        can_cancel=allows(JobAction.CANCEL, job.state),
        can_retry=allows(JobAction.RETRY, job.state),
    )


@router.get("/workers")
def workers_page(request: Request) -> HTMLResponse:
    hg = _hg(request)
    return _page(
        request,
        "workers.html",
        workers=hg.runtime.workers(),
        handlers=hg.runtime.declared_handlers(),
        lease=hg.runtime.lease(),
        now_ms=hg.clock.now_ms(),
    )


@router.get("/queues")
def queues_page(request: Request) -> HTMLResponse:
    """The paused queues and the busiest others, by name; how many more."""
    shown = busiest(_hg(request).queues.list(), PAGE_SHOWN, queue_weight)
    return _page(request, "queues.html", queues=shown.items, more=shown.more)


@router.get("/overview")
def overview_page(request: Request) -> HTMLResponse:
    hg = _hg(request)
    end = minute_of(hg.clock.now_ms()) + MINUTE_MS
    points = hg.metrics.activity(since_ms=end - SHOWN_MS)
    start = fitted_start(points, end - SHOWN_MS, end)
    return _page(
        request,
        "overview.html",
        charts=charts(points, start, end),
        any_points=bool(points),
        start_ms=start,
        end_ms=end,
        width=WIDTH,
        height=HEIGHT,
        plot=PLOT,
    )


@router.get("/limits")
def limits_page(request: Request) -> HTMLResponse:
    hg = _hg(request)
    return _page(
        request,
        "limits.html",
        limits=hg.limits.list(),
        rates=hg.rates.list(),
        limit_query=_limit_query,
    )


def _limit_query(limit: ConcurrencyLimitStatus) -> str:
    """The DELETE /limits query naming exactly this limit's scope."""
    scope = {"queue": limit.queue, "kind": limit.kind, "partition_key": limit.partition_key}
    return urlencode({name: value for name, value in scope.items() if value is not None})


@router.get("/quarantine")
def quarantine_page(
    request: Request, cursor: Annotated[str | None, Query()] = None
) -> HTMLResponse:
    try:
        page = _hg(request).quarantine.list(50, cursor)
    except ValidationError as error:
        return _problem(request, error)
    return _page(request, "quarantine.html", entries=page.entries, next_cursor=page.next_cursor)
