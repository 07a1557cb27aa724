"""The public read types a host service gets back from Headgate."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NamedTuple

from headgate._json import JsonValue
from headgate._projections import EnqueueHistoryRow, JobRow, ScheduleRow


class PeriodicOrigin(NamedTuple):
    schedule_id: str
    tick_ms: int


@dataclass(frozen=True)
class Schedule:
    id: str
    spec: str
    kind: str
    queue: str
    payload: JsonValue
    on_missed: str
    backfill_limit: int
    paused: bool
    next_run_ms: int
    last_enqueued_ms: int | None
    retry_at_ms: int | None
    """Set while the current tick is failing and waits for its retry."""

    @classmethod
    def from_row(cls, row: ScheduleRow) -> Schedule:
        return cls(
            id=row.schedule_id,
            spec=row.spec,
            kind=row.kind,
            queue=row.queue,
            payload=json.loads(row.payload),
            on_missed=row.on_missed,
            backfill_limit=row.backfill_limit,
            paused=row.paused,
            next_run_ms=row.next_run_ms,
            last_enqueued_ms=row.last_enqueued_ms,
            retry_at_ms=row.due_at_ms if row.failures else None,
        )


@dataclass(frozen=True)
class Job:
    id: str
    kind: str
    queue: str
    payload: JsonValue
    state: str
    unique_key: str | None
    created_at_ms: int
    periodic_origin: PeriodicOrigin | None

    @classmethod
    def from_row(cls, row: JobRow) -> Job:
        origin = None
        if row.periodic_schedule_id is not None and row.periodic_tick_ms is not None:
            origin = PeriodicOrigin(row.periodic_schedule_id, row.periodic_tick_ms)
        return cls(
            id=row.job_id,
            kind=row.kind,
            queue=row.queue,
            payload=json.loads(row.payload),
            state=row.state,
            unique_key=row.unique_key,
            created_at_ms=row.created_at_ms,
            periodic_origin=origin,
        )


@dataclass(frozen=True)
class EnqueueEvent:
    """One automatic tick attempt, as operators see it (`enqueue_events`, the API's
    enqueue-events): an `EnqueueAttempted` event, read from the enqueue_history
    projection (`EnqueueHistoryRow`). `event_id` is the event's log position."""

    event_id: int
    schedule_id: str
    tick_ms: int
    job_id: str
    outcome: str
    reason: str
    recorded_at_ms: int

    @classmethod
    def from_row(cls, row: EnqueueHistoryRow) -> EnqueueEvent:
        return cls(
            row.event_id,
            row.schedule_id,
            row.tick_ms,
            row.job_id,
            row.outcome,
            row.reason,
            row.recorded_at_ms,
        )


@dataclass(frozen=True)
class EnqueueEventsPage:
    events: list[EnqueueEvent]
    next_cursor: str | None


@dataclass(frozen=True)
class SchedulesPage:
    schedules: list[Schedule]
    next_cursor: str | None


class RunNowResult(NamedTuple):
    job_id: str
    replayed: bool


@dataclass(frozen=True)
class LeaseStatus:
    holder: str
    host: str
    pid: int
    term: int
    expires_at_ms: int
