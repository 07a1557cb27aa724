"""Domain events: immutable facts, named in the past tense.

How they are written down (type names, schema versions, JSON bodies,
upcasting) is the store's business: `headgate._store.mapper`. A change of an
event's shape bumps its `schema_version` and adds an upcaster there.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from headgate._errors import ValidationError
from headgate._json import JsonValue


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
