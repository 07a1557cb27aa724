"""Events to stored text and back: type names, schema versions, upcasting.

The persistence side of the domain's events (as eventsourcing's Mapper and
Transcoder are): the domain defines what happened; this module decides how
it is written down. On disk an event is its type name (the class name), a
schema version and a canonical JSON body; `decode` runs upcasters so an
event written by an older Headgate reads as the current shape. Nothing here
knows a database.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Final, TypeAlias

from headgate._domain.events import (
    ConcurrencyLimitCleared,
    ConcurrencyLimitSet,
    DomainEvent,
    EnqueueAttempted,
    FingerprintBlameCleared,
    FingerprintCrashBlamed,
    FingerprintQuarantined,
    FingerprintReleased,
    JobAbandoned,
    JobAttemptFailed,
    JobCancelled,
    JobClaimed,
    JobEnqueued,
    JobExpired,
    JobFinished,
    JobQuarantined,
    JobReleased,
    JobRetried,
    JobSnoozed,
    JobSucceeded,
    ManualRunRequested,
    NextRunAdvanced,
    QueuePaused,
    QueueResumed,
    RateLimitCleared,
    RateLimitSet,
    ScheduleDefined,
    ScheduleDeleted,
    ScheduleUndeclared,
)
from headgate._domain.options import JobOptions, ScheduleDefinition
from headgate._json import JsonValue, canonical_json_of_plain, encode_string

__all__ = [
    "EVENT_TYPES",
    "UPCASTERS",
    "UnknownEventType",
    "decode",
    "encode",
    "type_name",
]

EVENT_TYPES: Final[Mapping[str, type[DomainEvent]]] = {
    cls.__name__: cls
    for cls in (
        ScheduleDefined,
        ScheduleDeleted,
        ScheduleUndeclared,
        EnqueueAttempted,
        NextRunAdvanced,
        JobEnqueued,
        JobFinished,
        ManualRunRequested,
        FingerprintBlameCleared,
        FingerprintQuarantined,
        FingerprintReleased,
        JobClaimed,
        JobSucceeded,
        JobAttemptFailed,
        JobReleased,
        JobAbandoned,
        JobQuarantined,
        JobCancelled,
        JobRetried,
        JobExpired,
        JobSnoozed,
        FingerprintCrashBlamed,
        QueuePaused,
        QueueResumed,
        ConcurrencyLimitSet,
        ConcurrencyLimitCleared,
        RateLimitSet,
        RateLimitCleared,
    )
}
"""Stored type name -> event class. A stored name never changes: renaming an
event class needs an entry here under its old name."""


def type_name(event_type: type[DomainEvent]) -> str:
    """The name an event type is stored under (for queries that filter by type)."""
    return event_type.__name__


Upcaster: TypeAlias = Callable[[dict[str, JsonValue]], dict[str, JsonValue]]


def _attempt_v1_to_v2(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """v1 attempts did not say where they left the schedule (a NextRunAdvanced did)."""
    return {**body, "next_run_ms": None, "last_enqueued_ms": None}


def _job_options_v1_to_v2(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Before jobs ran in Headgate, they had no run time or options: now, and defaults."""
    return {**body, "run_at_ms": None, "max_attempts": None, "timeout_ms": None}


def _job_run_now_v2_to_v3(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Before v3 a manual run's job did not name its schedule (its Enqueue-now
    record did, for the key's seven days): it stays unlinked."""
    return {**body, "run_now_schedule_id": None}


def _job_options_nested_v3_to_v4(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Before v4 a job's options were fields of the event; now one JobOptions."""
    option_names = ("queue", "max_attempts", "timeout_ms", "run_at_ms", "unique_key")
    options = {name: body.get(name) for name in option_names}
    rest = {name: value for name, value in body.items() if name not in option_names}
    return {**rest, "options": options}


def _job_fair_turn_v4_to_v5(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Before v5 no job had a fair turn (every job took turn 0: the claim order
    of jobs without a partition key). Version 4 bodies were written both before
    and after `serial` was added, so a stored `serial` is kept."""
    return {"serial": False, **body, "fair_turn": 0}


def _job_trace_v5_to_v6(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Before v6 no job carried a trace context."""
    return {**body, "trace_context": None}


def _schedule_definition_nested_v3_to_v4(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Before v4 a schedule's definition was fields of the event; now one
    ScheduleDefinition (its jobs' options nested in it), and nothing declared
    in code (schedules were not told apart by who defines them)."""
    state = ("schedule_id", "next_run_ms", "last_enqueued_ms", "due_at_ms")
    job_names = ("queue", "max_attempts", "timeout_ms")
    definition = {
        name: value for name, value in body.items() if name not in state and name not in job_names
    }
    definition["job"] = {name: body.get(name) for name in job_names}
    return {
        **{name: body.get(name) for name in state},
        "definition": definition,
        "declared": None,
        "declared_by": None,
    }


def _backfill_max_v5_to_v6(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Before v6 a definition (and what the code declared) named `backfill_max`
    `backfill_limit`."""
    renamed = dict(body)
    for key in ("definition", "declared"):
        definition = body.get(key)
        if isinstance(definition, dict) and "backfill_limit" in definition:
            fields = dict(definition)
            fields["backfill_max"] = fields.pop("backfill_limit")
            renamed[key] = fields
    return renamed


def _schedule_options_v1_to_v2(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Before jobs ran in Headgate, schedules gave their jobs no options: defaults."""
    return {**body, "max_attempts": None, "timeout_ms": None}


def _failed_attempt_v1_to_v2(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Before v2 a failed attempt kept no traceback either."""
    return {**_attempt_limits_v1_to_v2(body), "traceback": None}


def _attempt_v2_to_v3(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Before schedules had an end or jitter, next_run_ms was due at itself."""
    return {**body, "due_at_ms": None, "finished": False}


def _advance_v1_to_v2(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """As for attempts: due at next_run_ms itself, never finished."""
    return {**body, "due_at_ms": None, "finished": False}


def _schedule_timing_v2_to_v3(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Before v3 schedules had no bounds and no jitter: due at next_run_ms."""
    return {**body, "start_at_ms": None, "end_at_ms": None, "jitter_ms": 0, "due_at_ms": None}


def _crash_attempt_v1_to_v2(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Before v2 a crash did not say which attempt it ended, nor when that began:
    unknown, as they were."""
    return {**body, "attempt": None, "claimed_at_ms": None}


def _attempt_limits_v1_to_v2(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Before v2 an attempt's end did not say the attempt limit and timeout it ran
    under: unknown, as they were."""
    return {**body, "max_attempts": None, "timeout_ms": None}


def _run_schedule_unknown(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Before this version a job's event did not say which schedule's run it
    settles: none is folded into a run history (its job says the outcome)."""
    return {**body, "schedule_id": None}


def _changed_by_unknown(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Before ScheduleDefined v5 and ScheduleDeleted v2 nobody recorded who made
    a change: it stays unknown (None), never guessed."""
    return {**body, "changed_by": None}


UPCASTERS: Final[dict[tuple[str, int], Upcaster]] = {
    (type_name(EnqueueAttempted), 1): _attempt_v1_to_v2,
    (type_name(EnqueueAttempted), 2): _attempt_v2_to_v3,
    (type_name(NextRunAdvanced), 1): _advance_v1_to_v2,
    (type_name(JobEnqueued), 1): _job_options_v1_to_v2,
    (type_name(JobEnqueued), 2): _job_run_now_v2_to_v3,
    (type_name(ScheduleDefined), 1): _schedule_options_v1_to_v2,
    (type_name(ScheduleDefined), 2): _schedule_timing_v2_to_v3,
    (type_name(JobEnqueued), 3): _job_options_nested_v3_to_v4,
    (type_name(JobEnqueued), 4): _job_fair_turn_v4_to_v5,
    (type_name(JobEnqueued), 5): _job_trace_v5_to_v6,
    (type_name(ScheduleDefined), 3): _schedule_definition_nested_v3_to_v4,
    (type_name(ScheduleDefined), 4): _changed_by_unknown,
    (type_name(ScheduleDefined), 5): _backfill_max_v5_to_v6,
    (type_name(ScheduleDeleted), 1): _changed_by_unknown,
    (type_name(JobAbandoned), 1): _crash_attempt_v1_to_v2,
    (type_name(JobQuarantined), 1): _crash_attempt_v1_to_v2,
    (type_name(JobSucceeded), 1): _attempt_limits_v1_to_v2,
    (type_name(JobAttemptFailed), 1): _failed_attempt_v1_to_v2,
    (type_name(JobSnoozed), 1): _attempt_limits_v1_to_v2,
    (type_name(JobSucceeded), 2): _run_schedule_unknown,
    (type_name(JobAttemptFailed), 2): _run_schedule_unknown,
    (type_name(JobQuarantined), 2): _run_schedule_unknown,
    (type_name(JobCancelled), 1): _run_schedule_unknown,
    (type_name(JobExpired), 1): _run_schedule_unknown,
    (type_name(JobRetried), 1): _run_schedule_unknown,
    (type_name(JobFinished), 1): _run_schedule_unknown,
}
"""(type name, stored schema version) -> function returning the next version's body."""

_SORTED_FIELDS: Final = {
    name: tuple(
        (field, json.dumps(field) + ":")
        for field in sorted(field.name for field in dataclasses.fields(cls))
    )
    for name, cls in EVENT_TYPES.items()
}
"""Per event type: (field, its JSON key prefix), in canonical (sorted) order."""
_int_text: Final[Callable[[int], str]] = int.__repr__


class UnknownEventType(ValueError):
    """The log holds an event this version of Headgate does not know."""


def encode(event: DomainEvent) -> tuple[str, int, str]:
    """(type name, schema version, canonical JSON body).

    The body is exactly `canonical_json` of the event's fields, assembled field
    by field: every tick writes two events, and the scalar fields that make
    up most of them need no general-purpose encoder.
    """
    name = type(event).__name__
    parts: list[str] = []
    for field, key in _SORTED_FIELDS[name]:
        value = getattr(event, field)
        kind = type(value)
        if kind is str:
            parts.append(key + encode_string(value))
        elif kind is int:
            parts.append(key + _int_text(value))
        else:
            parts.append(key + _field_json(value))
    return name, event.schema_version, "{" + ",".join(parts) + "}"


def _names(cls: type[object]) -> list[str]:
    return [field.name for field in dataclasses.fields(cls)]  # type: ignore[arg-type]


_NESTED_FIELDS: Final = {
    cls: tuple(
        (field, json.dumps(field) + ":")
        for field in sorted(f.name for f in dataclasses.fields(cls))
    )
    for cls in (JobOptions, ScheduleDefinition)
}
"""The value objects events carry whole: their fields in canonical order."""


def _nested_json(value: JobOptions | ScheduleDefinition) -> str:
    parts = [key + _field_json(getattr(value, field)) for field, key in _NESTED_FIELDS[type(value)]]
    return "{" + ",".join(parts) + "}"


def _field_json(value: JsonValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return encode_string(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return _int_text(value)
    if type(value) in _NESTED_FIELDS:
        return _nested_json(value)
    return canonical_json_of_plain(value)


def decode(stored_type: str, schema_version: int, body_text: str) -> DomainEvent:
    """The event a stored row holds, upcast to its current shape."""
    cls = EVENT_TYPES.get(stored_type)
    if cls is None:
        raise UnknownEventType(f"unknown event type {stored_type!r}")
    body: dict[str, JsonValue] = json.loads(body_text)
    version = schema_version
    while version < cls.schema_version:
        body = UPCASTERS[(stored_type, version)](body)
        version += 1
    if version > cls.schema_version:
        raise UnknownEventType(
            f"{stored_type} v{schema_version} is newer than this Headgate (v{cls.schema_version})"
        )
    for field, restore in _RESTORED.get(cls, ()):
        if body.get(field) is not None:
            body[field] = restore(body[field])
    return cls(**body)


def _restored_definition(value: JsonValue) -> ScheduleDefinition:
    return ScheduleDefinition.restored(**value)


def _restored_options(value: JsonValue) -> JobOptions:
    return JobOptions.restored(**value)


_RESTORED: Final[dict[type[DomainEvent], tuple[tuple[str, Callable[[JsonValue], object]], ...]]] = {
    ScheduleDefined: (("definition", _restored_definition), ("declared", _restored_definition)),
    JobEnqueued: (("options", _restored_options),),
}
"""The fields that hold a value object, read back as stored (unchecked: what a
store holds stays readable under later rules)."""
