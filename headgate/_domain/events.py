"""Domain events: immutable facts, stored as versioned JSON (never pickle).

Every event names what happened in the past tense. On disk an event is its type
name, a schema version and a JSON body; `decode` runs upcasters so an event
written by an older Headgate reads as the current shape.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Final, TypeAlias

from headgate._errors import ValidationError

JsonValue: TypeAlias = Any
"""Any value `json.dumps` accepts; payloads are opaque to Headgate."""


class Outcome(StrEnum):
    ENQUEUED = "enqueued"
    DEDUPLICATED = "deduplicated"
    FAILED = "failed"
    SKIPPED = "skipped"


class MissedRunPolicy(StrEnum):
    SKIP = "skip"
    RUN_ONCE = "run_once"
    BACKFILL = "backfill"


class JobState(StrEnum):
    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class DomainEvent:
    schema_version: ClassVar[int] = 1


@dataclass(frozen=True)
class ScheduleDefined(DomainEvent):
    """A schedule was created or changed.

    It carries the schedule's whole state (including `last_enqueued_ms`, copied
    from the current row), so the latest one is also the schedule's snapshot:
    compaction may drop everything older and a rebuild still folds to the same row.
    """

    schedule_id: str
    spec: str
    kind: str
    queue: str
    payload: JsonValue
    on_missed: MissedRunPolicy
    backfill_limit: int
    paused: bool
    next_run_ms: int
    last_enqueued_ms: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "on_missed", MissedRunPolicy(self.on_missed))


@dataclass(frozen=True)
class ScheduleDeleted(DomainEvent):
    schedule_id: str


@dataclass(frozen=True)
class EnqueueAttempted(DomainEvent):
    """The operator-facing audit record of one automatic tick attempt, and where
    it left the schedule.

    `attempt` counts consecutive attempts at this tick (1 for the first);
    `retry_at_ms` is set on a failure and says when the tick is retried.
    `next_run_ms` and `last_enqueued_ms` are the schedule's values once the
    attempt is recorded: an attempt that settled its tick (enqueued,
    deduplicated, skipped) advances next_run_ms; a failed one restates it. The
    record and the advance are one event, so they commit (or not) together,
    and the newest attempt alone says where the schedule stands, whatever
    compaction dropped before it. `next_run_ms` None means the attempt does not
    say: so read every event written before schema version 2, where a
    NextRunAdvanced followed.
    Never carries a payload or raw backend error text.
    """

    schema_version: ClassVar[int] = 2

    schedule_id: str
    tick_ms: int
    job_id: str
    outcome: Outcome
    reason: str
    attempt: int = 1
    retry_at_ms: int | None = None
    next_run_ms: int | None = None
    last_enqueued_ms: int | None = None

    def __post_init__(self) -> None:
        if type(self.outcome) is not Outcome:  # decoded text; the hot path passes the member
            object.__setattr__(self, "outcome", Outcome(self.outcome))


@dataclass(frozen=True)
class NextRunAdvanced(DomainEvent):
    """next_run_ms moved without an attempt: a due schedule with no tick to fire
    was realigned (and, before EnqueueAttempted v2, each settled attempt)."""

    schedule_id: str
    next_run_ms: int
    last_enqueued_ms: int | None


@dataclass(frozen=True)
class JobEnqueued(DomainEvent):
    job_id: str
    kind: str
    queue: str
    payload: JsonValue
    unique_key: str | None = None
    periodic_schedule_id: str | None = None
    periodic_tick_ms: int | None = None

    def __post_init__(self) -> None:
        if (self.periodic_schedule_id is None) != (self.periodic_tick_ms is None):
            raise ValidationError(
                "periodic_origin", "needs both schedule_id and tick_ms, or neither"
            )


@dataclass(frozen=True)
class JobFinished(DomainEvent):
    job_id: str
    state: JobState

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", JobState(self.state))


@dataclass(frozen=True)
class ManualRunRequested(DomainEvent):
    """An operator's Enqueue now; its stream exists once per idempotency key."""

    schedule_id: str
    idempotency_key: str
    job_id: str


@dataclass(frozen=True)
class FingerprintQuarantined(DomainEvent):
    fingerprint: str
    note: str = ""


@dataclass(frozen=True)
class FingerprintReleased(DomainEvent):
    fingerprint: str


@dataclass(frozen=True)
class RecordedEvent:
    """An event as the log holds it: where it sits and when the store took it."""

    position: int
    stream_id: str
    version: int
    recorded_at_ms: int
    event: DomainEvent

    @property
    def type(self) -> str:
        return type(self.event).__name__


EVENT_TYPES: Final[Mapping[str, type[DomainEvent]]] = {
    cls.__name__: cls
    for cls in (
        ScheduleDefined,
        ScheduleDeleted,
        EnqueueAttempted,
        NextRunAdvanced,
        JobEnqueued,
        JobFinished,
        ManualRunRequested,
        FingerprintQuarantined,
        FingerprintReleased,
    )
}

Upcaster: TypeAlias = Callable[[dict[str, JsonValue]], dict[str, JsonValue]]


def _attempt_v1_to_v2(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """v1 attempts did not say where they left the schedule (a NextRunAdvanced did)."""
    return {**body, "next_run_ms": None, "last_enqueued_ms": None}


UPCASTERS: Final[dict[tuple[str, int], Upcaster]] = {("EnqueueAttempted", 1): _attempt_v1_to_v2}
"""(type name, stored schema version) -> function returning the next version's body."""

_SORTED_FIELDS: Final = {
    name: tuple(
        (field, json.dumps(field) + ":")
        for field in sorted(field.name for field in dataclasses.fields(cls))
    )
    for name, cls in EVENT_TYPES.items()
}
"""Per event type: (field, its JSON key prefix), in canonical (sorted) order."""
_encode_string: Final[Callable[[str], str]] = json.encoder.encode_basestring
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
            parts.append(key + _encode_string(value))
        elif kind is int:
            parts.append(key + _int_text(value))
        else:
            parts.append(key + _field_json(value))
    return name, event.schema_version, "{" + ",".join(parts) + "}"


def _field_json(value: JsonValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return _encode_string(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return _int_text(value)
    return canonical_json_of_plain(value)


def decode(type_name: str, schema_version: int, body_text: str) -> DomainEvent:
    cls = EVENT_TYPES.get(type_name)
    if cls is None:
        raise UnknownEventType(f"unknown event type {type_name!r}")
    body: dict[str, JsonValue] = json.loads(body_text)
    version = schema_version
    while version < cls.schema_version:
        body = UPCASTERS[(type_name, version)](body)
        version += 1
    if version > cls.schema_version:
        raise UnknownEventType(
            f"{type_name} v{schema_version} is newer than this Headgate (v{cls.schema_version})"
        )
    return cls(**body)


_CANONICAL: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
_make_c_encoder: Callable[..., Callable[[JsonValue, int], Iterable[str]]] | None = getattr(
    json.encoder, "c_make_encoder", None
)
_canonical_parts: Final = (
    None
    if _make_c_encoder is None
    else _make_c_encoder(
        None,  # no cycle bookkeeping (see canonical_json_of_plain)
        _CANONICAL.default,
        json.encoder.encode_basestring,
        None,
        ":",
        ",",
        True,
        False,
        False,
    )
)
"""CPython's C encoder, made once: JSONEncoder.encode builds a new one on every
call, which cost more than encoding a typical payload."""


def canonical_json(value: JsonValue) -> str:
    """One text per value: sorted keys, no spaces, so equal values store equal bytes.

    Raises TypeError or ValueError (a value that contains itself among them)
    for what is not plain JSON. For any value from outside Headgate.
    """
    return _CANONICAL.encode(value)


def canonical_json_of_plain(value: JsonValue) -> str:
    """`canonical_json` of a value known to be plain JSON: decoded from JSON, or
    already through the admission gate. The hot path's encoder: it skips the
    bookkeeping that detects a value containing itself, which only input from
    outside can do."""
    if _canonical_parts is None or isinstance(value, str):
        return canonical_json(value)
    return "".join(_canonical_parts(value, 0))
