"""Domain events: immutable facts, named in the past tense.

How they are written down (type names, schema versions, JSON bodies,
upcasting) is the store's business: `headgate._store.mapper`. A change of an
event's shape bumps its `schema_version` and adds an upcaster there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar, Final

from headgate._domain.lifecycle import UNFINISHED_STATES, JobState
from headgate._domain.missed_runs import MissedRunPolicy
from headgate._domain.options import JobOptions, ScheduleDefinition
from headgate._errors import ValidationError
from headgate._json import JsonValue

__all__ = [
    "JOB_EVENTS",
    "RUN_EVENTS",
    "UNFINISHED_STATES",
    "ConcurrencyLimitCleared",
    "ConcurrencyLimitSet",
    "DomainEvent",
    "EnqueueAttempted",
    "FingerprintBlameCleared",
    "FingerprintCrashBlamed",
    "FingerprintQuarantined",
    "FingerprintReleased",
    "JobAbandoned",
    "JobAttemptFailed",
    "JobCancelled",
    "JobClaimed",
    "JobEnqueued",
    "JobExpired",
    "JobFinished",
    "JobQuarantined",
    "JobReleased",
    "JobRetried",
    "JobSnoozed",
    "JobState",
    "JobSucceeded",
    "ManualRunRequested",
    "MissedRunPolicy",
    "NextRunAdvanced",
    "Outcome",
    "QueuePaused",
    "QueueResumed",
    "RateLimitCleared",
    "RateLimitSet",
    "RecordedEvent",
    "ScheduleDefined",
    "ScheduleDeleted",
    "ScheduleUndeclared",
]


class Outcome(StrEnum):
    ENQUEUED = "enqueued"
    DEDUPLICATED = "deduplicated"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class DomainEvent:
    schema_version: ClassVar[int] = 1


@dataclass(frozen=True)
class ScheduleDefined(DomainEvent):
    """A schedule was created or changed: its whole `definition`, and where it stands.

    It carries the schedule's whole state (including `last_enqueued_ms`, copied
    from the current row), so the latest one is also the schedule's snapshot:
    compaction may drop everything older and a rebuild still folds to the same row.
    `due_at_ms` is the instant next_run_ms is due at (None: next_run_ms itself).
    `declared` is what the host's code declares for it (`Headgate.periodic`),
    None for a schedule only operators define: where the two differ, an
    operator's change overrides the code (see `_domain/ownership.py`).
    Versions 1-3 spelled the definition out field by field (the mapper's
    upcasters nest them); a field added to the definition or its job options
    reads as its default in older events. `changed_by` says who made the
    change (`headgate._actors`: "code:<group>" or "operator:<surface>");
    None in events before version 5, which did not record it. Before version 6
    the definitions named `backfill_max` `backfill_limit`.
    """

    schema_version: ClassVar[int] = 6

    schedule_id: str
    definition: ScheduleDefinition
    next_run_ms: int
    last_enqueued_ms: int | None = None
    due_at_ms: int | None = None
    declared: ScheduleDefinition | None = None
    declared_by: str | None = None
    """The declarations group of the code that declared it (None with `declared`)."""
    changed_by: str | None = None


@dataclass(frozen=True)
class ScheduleDeleted(DomainEvent):
    """An operator deleted the schedule; `changed_by` as in ScheduleDefined (None
    before version 2)."""

    schema_version: ClassVar[int] = 2

    schedule_id: str
    changed_by: str | None = None


@dataclass(frozen=True)
class ScheduleUndeclared(DomainEvent):
    """A runtime started whose code, of the declarations group `declared_by`,
    no longer declares this schedule: reported until the code declares it
    again or an operator deletes it (see `_domain/ownership.py`)."""

    schedule_id: str
    declared_by: str


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
    NextRunAdvanced followed. `due_at_ms` is the instant next_run_ms is due
    at (its jittered instant; None: next_run_ms itself) and `finished` says
    that next_run_ms is past the schedule's end, so it has no tick left; both
    arrived in version 3.
    Never carries a payload or raw backend error text.
    """

    schema_version: ClassVar[int] = 3

    schedule_id: str
    tick_ms: int
    job_id: str
    outcome: Outcome
    reason: str
    attempt: int = 1
    retry_at_ms: int | None = None
    next_run_ms: int | None = None
    last_enqueued_ms: int | None = None
    due_at_ms: int | None = None
    finished: bool = False

    def __post_init__(self) -> None:
        if type(self.outcome) is not Outcome:  # decoded text; the hot path passes the member
            object.__setattr__(self, "outcome", Outcome(self.outcome))


@dataclass(frozen=True)
class NextRunAdvanced(DomainEvent):
    """next_run_ms moved without an attempt: a due schedule with no tick to fire
    was realigned (and, before EnqueueAttempted v2, each settled attempt).
    `due_at_ms` and `finished` as in EnqueueAttempted (new in version 2)."""

    schema_version: ClassVar[int] = 2

    schedule_id: str
    next_run_ms: int
    last_enqueued_ms: int | None
    due_at_ms: int | None = None
    finished: bool = False


@dataclass(frozen=True)
class JobEnqueued(DomainEvent):
    """A job was created, with its `options` (its queue always set; options left
    None take its handler's, else Headgate's, defaults when it runs).
    `run_now_schedule_id` names the schedule whose Enqueue now made it (a tick's
    job names its schedule in `periodic_schedule_id` instead). Versions 1-3
    spelled the options out (the mapper's upcasters nest them); an option added
    later reads as its default in older events.

    `fair_turn` is its place among the partitions of its queue, given by the
    admission gate (`fair_share.turn`), and `trace_context` the trace its
    enqueue or tick was part of (W3C trace context as JSON text, or None): not
    part of what the job is, so two enqueues of the same job compare equal
    whatever turn or trace each had."""

    schema_version: ClassVar[int] = 6

    job_id: str
    kind: str
    payload: JsonValue
    options: JobOptions
    periodic_schedule_id: str | None = None
    periodic_tick_ms: int | None = None
    run_now_schedule_id: str | None = None
    serial: bool = False
    fair_turn: int = field(default=0, compare=False)
    trace_context: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if (self.periodic_schedule_id is None) != (self.periodic_tick_ms is None):
            raise ValidationError(
                "periodic_origin", "needs both schedule_id and tick_ms, or neither"
            )

    @property
    def queue(self) -> str:
        queue = self.options.queue
        assert queue is not None, "a job's queue is chosen before it is enqueued"
        return queue

    @property
    def unique_key(self) -> str | None:
        return self.options.unique_key


@dataclass(frozen=True)
class JobClaimed(DomainEvent):
    """A worker took the job to run an attempt (number `attempt`, 1 for the first)
    and must finish it by `deadline_ms`.

    Only in logs written by 0.2.0 and earlier: a claim is now the job row's own
    state (`JobQueue.claim`), not an event. These are still read and folded."""

    job_id: str
    worker_id: str
    attempt: int
    deadline_ms: int


@dataclass(frozen=True)
class JobSucceeded(DomainEvent):
    """The attempt's handler returned; `result` is its JSON value (bounded).
    `started_at_ms` is when the worker started the handler. `max_attempts` and
    `timeout_ms` are what the attempt ran under (the job's own, else its
    handler's): from then on the job shows them (None in logs before v2)."""

    schema_version: ClassVar[int] = 3
    job_id: str
    attempt: int
    worker_id: str
    started_at_ms: int
    result: JsonValue = None
    max_attempts: int | None = None
    timeout_ms: int | None = None
    schedule_id: str | None = None


@dataclass(frozen=True)
class JobAttemptFailed(DomainEvent):
    """The attempt's handler raised, returned something unstorable, or ran past its
    deadline. `retry_at_ms` is when the job runs again; None means it is out of
    attempts and has failed. `error_message` is truncated, and None where the host
    keeps exception texts out of the store. `max_attempts` and `timeout_ms` as
    for JobSucceeded. `traceback` is where it was raised (bounded; for a
    timeout, where the handler was at its deadline, when known): None before
    v2, and where nothing was raised."""

    schema_version: ClassVar[int] = 3
    job_id: str
    attempt: int
    worker_id: str
    started_at_ms: int
    error_type: str
    error_message: str | None
    retry_at_ms: int | None
    timed_out: bool = False
    max_attempts: int | None = None
    timeout_ms: int | None = None
    traceback: str | None = None
    schedule_id: str | None = None


@dataclass(frozen=True)
class JobSnoozed(DomainEvent):
    """The attempt's handler asked to run again later (`Snooze`): the job is due at
    `run_at_ms`, its attempt not counted; `snoozes` is how often it has snoozed.
    `max_attempts` and `timeout_ms` as for JobSucceeded."""

    schema_version: ClassVar[int] = 2
    job_id: str
    attempt: int
    worker_id: str
    started_at_ms: int
    run_at_ms: int
    snoozes: int
    max_attempts: int | None = None
    timeout_ms: int | None = None


@dataclass(frozen=True)
class JobReleased(DomainEvent):
    """A worker stopping gracefully gave the job back unfinished: it runs again at
    once, elsewhere, and no attempt or crash is counted."""

    job_id: str
    worker_id: str


@dataclass(frozen=True)
class JobAbandoned(DomainEvent):
    """The job's worker stopped heartbeating (it crashed, or froze past its lease):
    the rescuer made the job claimable again, its `crash_count` now this.

    `attempt` is the attempt the worker died in (the number its claim gave) and
    `claimed_at_ms` when that claim was recorded: the crashed attempt's number
    and start, which the attempt history shows. Version 1 had neither (None).
    """

    schema_version: ClassVar[int] = 2

    job_id: str
    worker_id: str
    crash_count: int
    attempt: int | None = None
    claimed_at_ms: int | None = None


@dataclass(frozen=True)
class JobQuarantined(DomainEvent):
    """The job crashed its workers too often (`crash_count`), its fingerprint
    quarantined in the same unit; or it was waiting to run when a rescue
    quarantined its fingerprint, and is held with it. Held until an operator
    retries it.

    For a crash, `attempt` and `claimed_at_ms` are as in JobAbandoned; None for
    a job held while it waited (and in version 1).
    """

    schema_version: ClassVar[int] = 3

    job_id: str
    fingerprint: str
    crash_count: int
    attempt: int | None = None
    claimed_at_ms: int | None = None
    schedule_id: str | None = None


@dataclass(frozen=True)
class JobCancelled(DomainEvent):
    """An operator cancelled the job (pending, or running: its worker is told)."""

    schema_version: ClassVar[int] = 2

    job_id: str
    schedule_id: str | None = None


@dataclass(frozen=True)
class JobExpired(DomainEvent):
    """The job was not started by its start deadline (`start_by_ms`, from its
    `start_within_ms`): it is recorded expired instead of running late."""

    schema_version: ClassVar[int] = 2

    job_id: str
    start_by_ms: int
    schedule_id: str | None = None


@dataclass(frozen=True)
class JobRetried(DomainEvent):
    """An operator sent a failed, cancelled or quarantined job back to run again,
    with its attempt and crash counts reset (its attempt history stays)."""

    schema_version: ClassVar[int] = 2

    job_id: str
    schedule_id: str | None = None


@dataclass(frozen=True)
class JobFinished(DomainEvent):
    """The host finished the job as `state` itself (`headgate.testing.finish_job`)."""

    schema_version: ClassVar[int] = 2

    job_id: str
    state: JobState
    schedule_id: str | None = None

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
class FingerprintCrashBlamed(DomainEvent):
    """A worker died running `job_id`, of this fingerprint, which takes its share of
    the crash (shared among the jobs that worker ran). `blame_milli` is the
    fingerprint's whole blame now, in thousandths of a crash: the latest of these
    events alone says where it stands, whatever compaction dropped before it."""

    fingerprint: str
    job_id: str
    blame_milli: int


@dataclass(frozen=True)
class FingerprintBlameCleared(DomainEvent):
    """A job of this fingerprint (`job_id`) completed: whatever killed workers
    beside its earlier jobs was not its payload, so its blame is forgotten.
    Without this, unrelated deaths (deploys, out-of-memory kills of a busy
    host) would pile up on a healthy periodic job until it was quarantined."""

    fingerprint: str
    job_id: str


@dataclass(frozen=True)
class QueuePaused(DomainEvent):
    """An operator paused a queue: nobody claims its jobs until it is resumed
    (running ones finish; enqueues are still taken)."""

    queue: str
    note: str = ""


@dataclass(frozen=True)
class QueueResumed(DomainEvent):
    queue: str


@dataclass(frozen=True)
class ConcurrencyLimitSet(DomainEvent):
    """An operator set a fleet-wide ceiling on running jobs of a scope (each of
    queue, kind and partition_key None for any; partition_key "*" for each key
    on its own): see `limits.ConcurrencyLimit`."""

    queue: str | None
    kind: str | None
    partition_key: str | None
    limit: int


@dataclass(frozen=True)
class ConcurrencyLimitCleared(DomainEvent):
    queue: str | None
    kind: str | None
    partition_key: str | None


@dataclass(frozen=True)
class RateLimitSet(DomainEvent):
    """At most `limit` jobs of `rate_class` start in any window of `per_ms`."""

    rate_class: str
    limit: int
    per_ms: int


@dataclass(frozen=True)
class RateLimitCleared(DomainEvent):
    rate_class: str


JOB_EVENTS: Final = (
    JobEnqueued,
    JobClaimed,
    JobSucceeded,
    JobAttemptFailed,
    JobReleased,
    JobAbandoned,
    JobQuarantined,
    JobCancelled,
    JobRetried,
    JobFinished,
    JobExpired,
    JobSnoozed,
)
"""The events of a job's own stream: its lifecycle, from JobEnqueued on."""

RUN_EVENTS: Final = (
    JobSucceeded,
    JobAttemptFailed,
    JobQuarantined,
    JobCancelled,
    JobExpired,
    JobRetried,
    JobFinished,
)
"""The job events that change what became of a schedule's run. Each carries
`schedule_id`: the schedule whose run (a tick's job, or an Enqueue now) the job
is, so the schedule's run history (`projections.schedule_runs`) folds it
without reading the job; None for any other job, and in events written before
the field was added (their runs' outcomes are read from the job instead)."""


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
