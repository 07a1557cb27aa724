"""Request and response bodies of the control API (they also make the OpenAPI schema)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool, StrictInt, StrictStr

from headgate._domain.admission import MAX_BACKFILL_LIMIT
from headgate._domain.describe import describe, missed_run_label
from headgate._domain.spec import MAX_INSTANT_MS, InvalidSpec, parse_spec
from headgate._model import EnqueueEvent, Job, Schedule

Policy = Literal["skip", "run_once", "backfill"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScheduleIn(Strict):
    kind: StrictStr
    spec: StrictStr
    payload: JsonValue = None
    queue: StrictStr = "default"
    on_missed: Policy = "skip"
    backfill_limit: StrictInt = Field(1, ge=1, le=MAX_BACKFILL_LIMIT)
    paused: StrictBool = False


class ScheduleOut(BaseModel):
    id: str
    kind: str
    queue: str
    spec: str
    on_missed: Policy
    backfill_limit: int
    paused: bool
    next_run_ms: int
    last_enqueued_ms: int | None
    payload: JsonValue = Field(None, description="Present only with ?include=payload")

    @classmethod
    def of(cls, schedule: Schedule, *, include_payload: bool = False) -> ScheduleOut:
        fields = {
            "id": schedule.id,
            "kind": schedule.kind,
            "queue": schedule.queue,
            "spec": schedule.spec,
            "on_missed": schedule.on_missed,
            "backfill_limit": schedule.backfill_limit,
            "paused": schedule.paused,
            "next_run_ms": schedule.next_run_ms,
            "last_enqueued_ms": schedule.last_enqueued_ms,
        }
        if include_payload:
            fields["payload"] = schedule.payload
        return cls.model_validate(fields)


class ScheduleList(BaseModel):
    schedules: list[ScheduleOut]
    next_cursor: str | None


class RunOut(BaseModel):
    id: str
    replayed: bool


class EventOut(BaseModel):
    event_id: int
    schedule_id: str
    tick_ms: int
    job_id: str
    outcome: Literal["enqueued", "deduplicated", "failed", "skipped"]
    reason: str
    recorded_at_ms: int

    @classmethod
    def of(cls, event: EnqueueEvent) -> EventOut:
        return cls.model_validate(event.__dict__)


class EventList(BaseModel):
    events: list[EventOut]
    next_cursor: str | None


class OriginIn(Strict):
    schedule_id: StrictStr | None = None
    tick_ms: StrictInt | None = Field(None, ge=0, le=MAX_INSTANT_MS)


class OriginOut(BaseModel):
    schedule_id: str
    tick_ms: int


class JobIn(Strict):
    kind: StrictStr
    payload: JsonValue = None
    queue: StrictStr = "default"
    unique_key: StrictStr | None = None
    periodic_origin: OriginIn | None = None


class JobOut(BaseModel):
    id: str
    kind: str
    queue: str
    payload: JsonValue
    state: str
    unique_key: str | None
    created_at_ms: int
    periodic_origin: OriginOut | None

    @classmethod
    def of(cls, job: Job) -> JobOut:
        origin = job.periodic_origin
        return cls(
            id=job.id,
            kind=job.kind,
            queue=job.queue,
            payload=job.payload,
            state=job.state,
            unique_key=job.unique_key,
            created_at_ms=job.created_at_ms,
            periodic_origin=None
            if origin is None
            else OriginOut(schedule_id=origin.schedule_id, tick_ms=origin.tick_ms),
        )


class SpecPreview(BaseModel):
    valid: bool
    error: str | None
    spec: str | None = Field(None, description="The normalised spec")
    description: str | None
    next_ticks_ms: list[int]


class ErrorOut(BaseModel):
    error: str


def preview(spec: str, now_ms: int, count: int = 5) -> SpecPreview:
    try:
        parsed = parse_spec(spec)
    except InvalidSpec as error:
        return SpecPreview(
            valid=False, error=str(error), spec=None, description=None, next_ticks_ms=[]
        )
    ticks, tick = [], now_ms
    for _ in range(count):
        tick = parsed.next_tick_ms(tick)
        ticks.append(tick)
    return SpecPreview(
        valid=True, error=None, spec=parsed.text, description=describe(parsed), next_ticks_ms=ticks
    )


def policy_label(schedule: Schedule) -> str:
    return missed_run_label(schedule.on_missed, schedule.backfill_limit)
