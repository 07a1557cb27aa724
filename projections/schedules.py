"""The schedules read model: one row per schedule, including deleted ones."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Final

from headgate._domain.events import (
    EnqueueAttempted,
    NextRunAdvanced,
    Outcome,
    RecordedEvent,
    ScheduleDefined,
    ScheduleDeleted,
    ScheduleUndeclared,
)
from headgate._domain.options import JobOptions, ScheduleDefinition
from headgate._json import canonical_json_of_plain
from headgate._projections.base import Projection


@dataclass(frozen=True)
class ScheduleRow:
    schedule_id: str
    spec: str
    kind: str
    queue: str
    payload: str
    """Canonical JSON text."""
    on_missed: str
    backfill_limit: int
    paused: bool
    next_run_ms: int
    due_at_ms: int
    """When the scheduler should next look at it: next_run_ms, or a retry time
    after a failed attempt (the tick itself stays next_run_ms)."""
    failures: int
    """Consecutive failed attempts at the current tick."""
    last_enqueued_ms: int | None
    version: int
    """The schedule stream's version this row reflects: the compare-and-set token."""
    deleted: bool
    updated_at_ms: int
    max_attempts: int | None
    """Options the schedule's jobs carry (None: the handler's defaults)."""
    timeout_ms: int | None
    start_at_ms: int | None = None
    """No tick before it (None: none)."""
    end_at_ms: int | None = None
    """No tick after it (None: none)."""
    jitter_ms: int = 0
    """Each tick is due up to this much after it (0: at the tick)."""
    finished: bool = False
    """next_run_ms is past end_at_ms: no tick is left, and the due read skips it."""
    declared: str | None = None
    """What the host's code declares for it, its flat fields as canonical JSON
    (None: only operators define it; see `declared_of`)."""
    declared_by: str | None = None
    """The declarations group of the code that declares it."""
    undeclared_at_ms: int | None = None
    """When a runtime of that group started without declaring it (None: declared,
    or never was)."""
    summary: str = ""
    """What it is for, shown to operators."""
    priority: int | None = None
    """Its jobs' priority (None: the default, 0)."""
    overlap: str = "allow"
    """What a tick does while an earlier tick job is pending or running (OverlapPolicy)."""
    start_within_ms: int | None = None
    """Its tick jobs expire unless started this long after their tick (None: never)."""
    partition_key: str | None = None
    """Its jobs' partition key (None: their handler's)."""
    rate_class: str | None = None
    """Its jobs' rate class (None: their handler's)."""


_KEYED: Final = (
    ScheduleDefined,
    ScheduleDeleted,
    EnqueueAttempted,
    NextRunAdvanced,
    ScheduleUndeclared,
)
"""The events a schedule row folds (a tuple: isinstance with a `A | B` union
would build the union on every call, and this runs for every event)."""


def key(recorded: RecordedEvent) -> str | None:
    event: Any = recorded.event
    if isinstance(event, _KEYED):
        return str(event.schedule_id)
    return None


def apply(row: ScheduleRow | None, recorded: RecordedEvent) -> ScheduleRow | None:
    event = recorded.event
    if isinstance(event, ScheduleDefined):
        return _defined(event, recorded)
    if row is None:
        # Only reachable in a compacted log, where the latest definition (a full
        # snapshot) comes later and sets every field.
        return None
    delta = changes(recorded)
    return row if delta is None else replace(row, **delta)


def changes(recorded: RecordedEvent) -> dict[str, Any] | None:
    """The columns an event sets (every later event sets them regardless of the
    row), or None for an event that does not touch a schedule's row."""
    event = recorded.event
    if isinstance(event, NextRunAdvanced):
        return {
            "next_run_ms": event.next_run_ms,
            "due_at_ms": event.next_run_ms if event.due_at_ms is None else event.due_at_ms,
            "failures": 0,
            "last_enqueued_ms": event.last_enqueued_ms,
            "finished": event.finished,
            **_touched(recorded),
        }
    if isinstance(event, EnqueueAttempted):
        return _attempted(event, recorded)
    if isinstance(event, ScheduleDeleted):
        return {"deleted": True, **_touched(recorded)}
    if isinstance(event, ScheduleUndeclared):
        return {"undeclared_at_ms": recorded.recorded_at_ms, **_touched(recorded)}
    return None


def _attempted(event: EnqueueAttempted, recorded: RecordedEvent) -> dict[str, Any]:
    """Where the attempt left the schedule (a v1 attempt says nothing of
    next_run_ms: a NextRunAdvanced of its own did), its failure count, and its
    retry time (a failure without one keeps the row's due time). Built as one
    dict: this runs for every tick."""
    failed = event.outcome is Outcome.FAILED
    delta: dict[str, Any] = {
        "failures": event.attempt if failed else 0,
        "version": recorded.version,
        "updated_at_ms": recorded.recorded_at_ms,
    }
    if event.next_run_ms is not None:
        delta["next_run_ms"] = event.next_run_ms
        delta["due_at_ms"] = event.next_run_ms if event.due_at_ms is None else event.due_at_ms
        delta["last_enqueued_ms"] = event.last_enqueued_ms
        delta["finished"] = event.finished
    if failed:
        if event.retry_at_ms is None:
            delta.pop("due_at_ms", None)
        else:
            delta["due_at_ms"] = event.retry_at_ms
    return delta


def _touched(recorded: RecordedEvent) -> dict[str, Any]:
    return {"version": recorded.version, "updated_at_ms": recorded.recorded_at_ms}


def creates(recorded: RecordedEvent) -> dict[str, Any] | None:
    """A schedule's stream starts with ScheduleDefined, so at version 1 it always
    makes a new row (a re-definition after a delete continues the stream)."""
    event = recorded.event
    if recorded.version != 1 or not isinstance(event, ScheduleDefined):
        return None
    return _defined_columns(event, recorded)


def _defined(event: ScheduleDefined, recorded: RecordedEvent) -> ScheduleRow:
    return ScheduleRow(**_defined_columns(event, recorded))


def _defined_columns(event: ScheduleDefined, recorded: RecordedEvent) -> dict[str, Any]:
    definition = event.definition
    return {
        "schedule_id": event.schedule_id,
        **definition_columns(definition),
        "next_run_ms": event.next_run_ms,
        "due_at_ms": event.next_run_ms if event.due_at_ms is None else event.due_at_ms,
        "failures": 0,
        "last_enqueued_ms": event.last_enqueued_ms,
        "version": recorded.version,
        "deleted": False,
        "updated_at_ms": recorded.recorded_at_ms,
        "finished": definition.end_at_ms is not None and event.next_run_ms > definition.end_at_ms,
        "declared": None if event.declared is None else _flat_json(event.declared),
        "declared_by": event.declared_by,
        "undeclared_at_ms": None,
    }


def _flat_json(definition: ScheduleDefinition) -> str:
    fields = definition.fields()
    fields["on_missed"] = definition.on_missed.value
    fields["overlap"] = definition.overlap.value
    return canonical_json_of_plain(fields)


def declared_of(row: ScheduleRow) -> ScheduleDefinition | None:
    """What the host's code declares for the schedule, as stored (None: nothing)."""
    if row.declared is None:
        return None
    return ScheduleDefinition.restored_fields(json.loads(row.declared))


def definition_columns(definition: ScheduleDefinition) -> dict[str, Any]:
    """A definition as the row's columns (`definition_of` reads them back)."""
    job = definition.job
    return {
        "spec": definition.spec,
        "kind": definition.kind,
        "summary": definition.summary,
        "queue": job.queue,
        "payload": canonical_json_of_plain(definition.payload),
        "on_missed": definition.on_missed.value,
        "backfill_limit": definition.backfill_max,
        "overlap": definition.overlap.value,
        "paused": definition.paused,
        "max_attempts": job.max_attempts,
        "timeout_ms": job.timeout_ms,
        "priority": job.priority,
        "start_within_ms": job.start_within_ms,
        "partition_key": job.partition_key,
        "rate_class": job.rate_class,
        "start_at_ms": definition.start_at_ms,
        "end_at_ms": definition.end_at_ms,
        "jitter_ms": definition.jitter_ms,
    }


def definition_of(row: ScheduleRow) -> ScheduleDefinition:
    """The definition a row holds, as stored (unchecked: see ScheduleDefinition.restored)."""
    return ScheduleDefinition.restored(
        spec=row.spec,
        kind=row.kind,
        summary=row.summary,
        payload=json.loads(row.payload),
        on_missed=row.on_missed,
        backfill_max=row.backfill_limit,
        overlap=row.overlap,
        paused=row.paused,
        start_at_ms=row.start_at_ms,
        end_at_ms=row.end_at_ms,
        jitter_ms=row.jitter_ms,
        job=job_options_of(row),
    )


def job_options_of(row: ScheduleRow) -> JobOptions:
    """The options of the schedule's jobs, as stored."""
    return JobOptions.restored(
        queue=row.queue,
        max_attempts=row.max_attempts,
        timeout_ms=row.timeout_ms,
        priority=row.priority,
        start_within_ms=row.start_within_ms,
        partition_key=row.partition_key,
        rate_class=row.rate_class,
    )


SCHEDULES: Projection[ScheduleRow] = Projection(
    name="schedules",
    table="schedules",
    row_type=ScheduleRow,
    key_column="schedule_id",
    key=key,
    apply=apply,
    creates=creates,
    changes=changes,
)
