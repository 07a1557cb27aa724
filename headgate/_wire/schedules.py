"""The bodies of /schedules: a schedule's definition in (derived from
`ScheduleDefinition`, `derived`), a schedule, its runs, health and enqueue
attempts out, and the spec preview."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, cast

from pydantic import BaseModel, Field, StrictStr, computed_field, create_model

from headgate._domain.decisions import Reason
from headgate._domain.describe import describe
from headgate._domain.read_fields import SCHEDULE_READ
from headgate._domain.spec import InvalidSpec, interval_problem, parse_spec
from headgate._model import EnqueueEvent, Schedule, ScheduleHealth, ScheduleRun
from headgate._wire.derived import Strict, read_fields, schedule_body, schedule_changes_body

if TYPE_CHECKING:
    ScheduleIn = BaseModel
    ScheduleItemIn = BaseModel
    ScheduleChangesIn = BaseModel
    _ScheduleFields = BaseModel
else:
    ScheduleIn = schedule_body("ScheduleIn")
    ScheduleItemIn = schedule_body(
        "ScheduleItemIn",
        extra={
            "id": (StrictStr, Field(description="The schedule's id, as in PUT /schedules/{id}"))
        },
    )
    ScheduleChangesIn = schedule_changes_body("ScheduleChangesIn")
    _ScheduleFields = create_model(
        "_ScheduleFields",
        **read_fields(SCHEDULE_READ, Schedule, {}, options_typed_by_domain=True),
    )


class SchedulesIn(Strict):
    schedules: list[ScheduleItemIn] = Field(
        description="Each schedule once; validated all before any is written"
    )


Outcome = Literal["created", "updated", "unchanged"]


class PutResultOut(BaseModel):
    id: str
    outcome: Outcome


class SchedulesPutOut(BaseModel):
    created: int
    updated: int
    unchanged: int
    results: list[PutResultOut] = Field(description="Each schedule's outcome, in the body's order")

    @classmethod
    def of(cls, outcomes: dict[str, str]) -> SchedulesPutOut:
        counts = {name: 0 for name in ("created", "updated", "unchanged")}
        for outcome in outcomes.values():
            counts[outcome] += 1
        return cls(
            **counts,
            results=[
                PutResultOut(id=schedule_id, outcome=cast(Outcome, outcome))
                for schedule_id, outcome in outcomes.items()
            ],
        )


class ScheduleOut(_ScheduleFields):
    """A schedule: every field of `Schedule` (`SCHEDULE_READ`: its definition, every
    field PUT takes, and where it stands), and how it is doing."""

    @computed_field(  # type: ignore[prop-decorator]
        description="backfill_max's former name, sent as well until 0.4.0",
        json_schema_extra={"deprecated": True},
    )
    @property
    def backfill_limit(self) -> int:
        value: int = getattr(self, "backfill_max")  # noqa: B009 (a field derived, unknown to mypy)
        return value

    health: ScheduleHealthOut | None = Field(
        default=None,
        description="How it is doing, from its newest runs (GET /schedules and "
        "GET /schedules/{id}; null in the answers of writes)",
    )
    last_run: ScheduleRunOut | None = Field(
        default=None,
        description="Its newest run and what became of it (null: none yet, or the answer "
        "of a write)",
    )

    @classmethod
    def of(cls, schedule: Schedule, health: ScheduleHealth | None = None) -> ScheduleOut:
        fields = {field.name: getattr(schedule, field.name) for field in SCHEDULE_READ}
        shown_health = None if health is None else ScheduleHealthOut.of(health)
        last_run = None if health is None or health.last_run is None else health.last_run
        return cls.model_validate(
            {
                **fields,
                "health": shown_health,
                "last_run": None if last_run is None else ScheduleRunOut.of(last_run),
            }
        )


RunOutcome = Literal[
    "enqueued",
    "running",
    "retrying",
    "succeeded",
    "failed",
    "expired",
    "cancelled",
    "quarantined",
]


class ScheduleRunOut(BaseModel):
    """What became of one run of a schedule: a tick's job, or an Enqueue now's."""

    job_id: str
    schedule_id: str
    tick_ms: int | None = Field(description="The tick it ran for; null for an Enqueue now")
    manual: bool = Field(description="Made by an operator's Enqueue now, not a tick")
    outcome: RunOutcome = Field(
        description="enqueued (waiting to start), running, retrying (an attempt failed; it "
        "runs again), succeeded, failed, expired (not started by its deadline), cancelled "
        "or quarantined"
    )
    attempts: int = Field(description="Attempts that ended")
    enqueued_at_ms: int
    started_at_ms: int | None = Field(description="When its last ended attempt started")
    finished_at_ms: int | None = Field(
        description="When it settled (retrying: when its last attempt ended)"
    )
    duration_ms: int | None = Field(description="How long its last ended attempt ran")
    error_type: str | None = Field(
        description="Its last failed attempt's error type (the message and traceback are "
        "on GET /jobs/{job_id})"
    )

    @classmethod
    def of(cls, run: ScheduleRun) -> ScheduleRunOut:
        return cls.model_validate({**run.__dict__})


class ScheduleRunList(BaseModel):
    runs: list[ScheduleRunOut] = Field(description="Newest first; the newest 100 are kept")
    next_cursor: str | None


class ScheduleHealthOut(BaseModel):
    """How a schedule is doing now, from its newest 100 runs."""

    state: Literal["ok", "failing", "late", "missing", "paused"] = Field(
        description="The first that holds: paused; missing (a tick due longer than grace_ms "
        "and none fired: no scheduler, or it is behind); failing (its newest settled run "
        "failed); late (a tick's job waited longer than grace_ms to start); else ok"
    )
    consecutive_failures: int = Field(
        description="Settled runs in a row, newest first, that failed (cancels skipped)"
    )
    last_success_ms: int | None
    last_failure_ms: int | None
    last_error_type: str | None = Field(description="The newest failed run's error type")
    duration_p50_ms: int | None = Field(description="Of the recent runs that ran to an end")
    duration_p95_ms: int | None
    runs_read: int = Field(description="How many recent runs these figures come from (≤ 100)")
    as_of_ms: int = Field(description="When it was judged")
    grace_ms: int = Field(description="How long a due tick or a waiting job may wait")

    @classmethod
    def of(cls, health: ScheduleHealth) -> ScheduleHealthOut:
        return cls.model_validate(
            {name: value for name, value in health.__dict__.items() if name in cls.model_fields}
        )


class ScheduleList(BaseModel):
    schedules: list[ScheduleOut]
    next_cursor: str | None


class UpcomingOut(BaseModel):
    tick_ms: int = Field(description="The tick's identity (its job's periodic_origin.tick_ms)")
    due_at_ms: int = Field(description="When it is enqueued: the tick, later by its jitter")


class UpcomingList(BaseModel):
    upcoming: list[UpcomingOut] = Field(
        description="Oldest first, from next_run_ms; empty while paused or once finished"
    )


class EnqueueNowOut(BaseModel):
    id: str
    replayed: bool


class EventOut(BaseModel):
    event_id: int
    schedule_id: str
    tick_ms: int
    job_id: str
    outcome: Literal["enqueued", "deduplicated", "failed", "skipped"]
    reason: str = Field(
        description="Why, as a stable code: "
        + ", ".join(reason.value for reason in Reason)
        + " (overlap: skipped because an earlier tick job of the schedule was pending or "
        "running, under overlap skip or buffer_one)"
    )
    recorded_at_ms: int

    @classmethod
    def of(cls, event: EnqueueEvent) -> EventOut:
        return cls.model_validate(event.__dict__)


class EventList(BaseModel):
    events: list[EventOut]
    next_cursor: str | None


class SpecPreview(BaseModel):
    valid: bool = Field(description="Whether a schedule may have it here (min_interval_ms too)")
    error: str | None
    spec: str | None = Field(None, description="The normalised spec")
    description: str | None
    next_ticks_ms: list[int]
    min_interval_ms: int = Field(description="This server's minimum interval between ticks")


def preview(spec: str, now_ms: int, min_interval_ms: int, count: int = 5) -> SpecPreview:
    """What PUT /schedules/{id} would make of `spec`: its normal form and next
    ticks, or why it is refused (a spec below the minimum interval is shown
    too, with the reason it is refused)."""
    try:
        parsed = parse_spec(spec)
    except InvalidSpec as error:
        return SpecPreview(
            valid=False,
            error=str(error),
            spec=None,
            description=None,
            next_ticks_ms=[],
            min_interval_ms=min_interval_ms,
        )
    ticks, tick = [], now_ms
    for _ in range(count):
        tick = parsed.next_tick_ms(tick)
        ticks.append(tick)
    too_often = interval_problem(parsed, min_interval_ms)
    return SpecPreview(
        valid=too_often is None,
        error=too_often,
        spec=parsed.text,
        description=describe(parsed),
        next_ticks_ms=ticks,
        min_interval_ms=min_interval_ms,
    )
