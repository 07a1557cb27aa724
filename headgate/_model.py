"""The public read types a host service gets back from Headgate."""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, NamedTuple

from headgate._domain.events import JobState
from headgate._domain.ids import fingerprint_of_text
from headgate._domain.limits import RunningKey
from headgate._domain.options import SCHEDULE_FIELDS, ScheduleDefinition
from headgate._domain.ownership import overrides
from headgate._json import JsonValue
from headgate._projections import (
    ConcurrencyLimitRow,
    EnqueueHistoryRow,
    JobAttemptRow,
    JobRow,
    QuarantineRow,
    RateLimitRow,
    ScheduleRow,
)
from headgate._projections.schedules import declared_of, definition_of
from headgate._store.port import DeclaredHandler as DeclaredHandlerRow
from headgate._store.port import LimitsState, RunRead


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
    backfill_max: int
    paused: bool
    next_run_ms: int
    last_enqueued_ms: int | None
    retry_at_ms: int | None
    """Set while the current tick is failing and waits for its retry."""
    max_attempts: int | None = None
    """What its jobs carry (None: the handler's)."""
    timeout_ms: int | None = None
    start_at_ms: int | None = None
    """No tick before it (None: unbounded)."""
    end_at_ms: int | None = None
    """No tick after it (None: unbounded)."""
    jitter_ms: int = 0
    """Each tick is enqueued a stable delay in [0, jitter_ms) after it."""
    finished: bool = False
    """Its next tick is past end_at_ms: it has no tick left."""

    next_due_at_ms: int | None = None
    """When next_run_ms is enqueued: the tick, later by its jitter, or a failing
    tick's retry time (None: finished)."""
    declared_in_code: bool = False
    """The host's code declares it (`Headgate.periodic`): the code owns its definition."""
    overrides: tuple[str, ...] = ()
    """The fields an operator changed from what the code declares (kept across
    deploys until `hg.schedules.clear_overrides`); always empty when not declared in code."""
    undeclared_at_ms: int | None = None
    """When a runtime of its declarations group started without declaring it
    (the declaration disappeared from the code); None while declared."""
    summary: str = ""
    """What it is for, shown to operators."""
    priority: int | None = None
    """What its jobs carry (None: the default, 0)."""
    overlap: str = "allow"
    """What a tick does while an earlier tick job is pending or running
    (`OverlapPolicy`: allow, skip, buffer_one, cancel_previous)."""
    start_within_ms: int | None = None
    """Its tick jobs expire unless started this long after their tick (None: never)."""
    partition_key: str | None = None
    """What its jobs carry (None: none)."""
    rate_class: str | None = None
    """The rate limit its jobs start under (None: none)."""

    @property
    def backfill_limit(self) -> int:
        """`backfill_max`'s former name (deprecated: goes in the next minor version)."""
        warnings.warn(
            "Schedule.backfill_limit is deprecated and will be removed in the next minor "
            "version: use Schedule.backfill_max",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.backfill_max

    @property
    def definition(self) -> ScheduleDefinition:
        """Its definition as one value object (as stored: unchecked)."""
        return ScheduleDefinition.restored_fields(
            {name: getattr(self, name) for name in SCHEDULE_FIELDS}
        )

    @classmethod
    def from_row(cls, row: ScheduleRow) -> Schedule:
        declared = declared_of(row)
        return cls(
            id=row.schedule_id,
            spec=row.spec,
            kind=row.kind,
            queue=row.queue,
            payload=json.loads(row.payload),
            on_missed=row.on_missed,
            backfill_max=row.backfill_limit,
            paused=row.paused,
            next_run_ms=row.next_run_ms,
            last_enqueued_ms=row.last_enqueued_ms,
            retry_at_ms=row.due_at_ms if row.failures else None,
            max_attempts=row.max_attempts,
            timeout_ms=row.timeout_ms,
            start_at_ms=row.start_at_ms,
            end_at_ms=row.end_at_ms,
            jitter_ms=row.jitter_ms,
            finished=row.finished,
            next_due_at_ms=None if row.finished else row.due_at_ms,
            declared_in_code=declared is not None,
            overrides=() if declared is None else tuple(overrides(definition_of(row), declared)),
            undeclared_at_ms=row.undeclared_at_ms,
            summary=row.summary,
            priority=row.priority,
            overlap=row.overlap,
            start_within_ms=row.start_within_ms,
            partition_key=row.partition_key,
            rate_class=row.rate_class,
        )


class UpcomingRun(NamedTuple):
    """A tick the schedule will fire if nothing changes, and when it is enqueued."""

    tick_ms: int
    """The tick's identity (its job's periodic_origin.tick_ms)."""
    due_at_ms: int
    """When it is enqueued: the tick, later by its jitter (or a retry time)."""


@dataclass(frozen=True)
class JobAttempt:
    """How one attempt at a job ended (newest first in `Job.attempt_history`), or
    an operator's retry, after which the numbers start again from 1."""

    attempt: int
    """Its number; for a crash, the attempt it ended (0 if the crash was recorded
    by a build that did not say); 0 for a release and a retry."""
    outcome: str
    """succeeded, failed, timed_out, released, crashed, quarantined or retried."""
    worker_id: str | None
    started_at_ms: int | None
    """When its handler started; for a crash, when the attempt was claimed."""
    ended_at_ms: int
    """When it ended; for a retry, when the operator asked for it."""
    error_type: str | None
    error_message: str | None
    traceback: str | None = None
    """Where a failed attempt's exception was raised, as Python prints it (bounded;
    for a timeout, where its handler was at its deadline, when known). It holds
    what the handler's code put in exception messages: see
    `Headgate(redact_errors=...)`."""

    @property
    def duration_ms(self) -> int | None:
        """How long its handler ran, when it started one."""
        if self.started_at_ms is None or self.outcome in {"crashed", "quarantined"}:
            return None
        return max(self.ended_at_ms - self.started_at_ms, 0)

    @classmethod
    def from_row(cls, row: JobAttemptRow) -> JobAttempt:
        return cls(
            row.attempt,
            row.outcome,
            row.worker_id,
            row.started_at_ms,
            row.ended_at_ms,
            row.error_type,
            row.error_message,
            row.traceback,
        )


@dataclass(frozen=True)
class RunningAttempt:
    """The attempt a running job is in: not in the attempt history until it ends."""

    attempt: int
    worker_id: str | None
    started_at_ms: int
    """When it was claimed."""
    deadline_ms: int | None
    """When it times out."""

    @classmethod
    def of(cls, row: JobRow) -> RunningAttempt | None:
        """A running job's row was last changed by its claim: its attempt is the one
        after those that ended, begun when the row was last updated."""
        if row.state != JobState.RUNNING:
            return None
        return cls(row.attempts + 1, row.worker_id, row.updated_at_ms, row.deadline_ms)


@dataclass(frozen=True)
class Job:
    id: str
    kind: str
    queue: str
    payload: JsonValue
    state: str
    """pending, running, completed, failed, cancelled or quarantined."""
    unique_key: str | None
    created_at_ms: int
    periodic_origin: PeriodicOrigin | None
    attempts: int = 0
    """Attempts that ran to an end."""
    crash_count: int = 0
    run_at_ms: int = 0
    """When it runs (next)."""
    max_attempts: int | None = None
    """None: its handler's."""
    timeout_ms: int | None = None
    worker_id: str | None = None
    """The worker running it, while it runs."""
    result: JsonValue = None
    error_type: str | None = None
    """The newest failed attempt's error while the job has not completed; once it
    has, None (each failed attempt keeps its error in `attempt_history`). An error
    type is named as it is imported: `ValueError`, `headgate.InvalidResult`,
    `myapp.billing.PaymentDeclined`."""
    error_message: str | None = None
    updated_at_ms: int = 0
    attempt_history: tuple[JobAttempt, ...] = ()
    """The newest ended attempts, newest first (filled by get_job)."""
    run_now_schedule_id: str | None = None
    """The schedule whose Enqueue now made it (a tick's job has `periodic_origin`)."""
    fingerprint: str = ""
    """What quarantine matches: its kind and payload (`hg.quarantine.fingerprint`), to
    quarantine jobs like it (`Headgate.quarantine`) or find why it is refused."""
    running_attempt: RunningAttempt | None = None
    """The attempt under way, while the job is running."""
    priority: int = 0
    """Higher is claimed first within its queue."""
    start_within_ms: int | None = None
    """Not started this long after it was due, it expires (None: no deadline)."""
    snoozes: int = 0
    """Times its handler snoozed it (`Snooze`), which attempts do not count."""
    start_by_ms: int | None = None
    """It expires unless started by then (from `start_within_ms`; None: no deadline,
    or it has started)."""
    partition_key: str | None = None
    """Its share of the queue (fair share, per-partition limits); None: none."""
    rate_class: str | None = None
    """The rate limit it starts under; None: none."""
    waiting_for: tuple[str, ...] = ()
    """Why a due pending job has not started, in words (a paused queue, a full
    concurrency limit, a used-up rate class); filled by get_job, else empty."""

    @classmethod
    def from_row(cls, row: JobRow, attempts: Sequence[JobAttemptRow] = ()) -> Job:
        origin = None
        if row.periodic_schedule_id is not None and row.periodic_tick_ms is not None:
            origin = PeriodicOrigin(row.periodic_schedule_id, row.periodic_tick_ms)
        completed = row.state == JobState.COMPLETED
        return cls(
            id=row.job_id,
            kind=row.kind,
            queue=row.queue,
            payload=json.loads(row.payload),
            state=row.state,
            unique_key=row.unique_key,
            created_at_ms=row.created_at_ms,
            periodic_origin=origin,
            attempts=row.attempts,
            crash_count=row.crash_count,
            run_at_ms=row.run_at_ms,
            max_attempts=row.max_attempts,
            timeout_ms=row.timeout_ms,
            worker_id=row.worker_id,
            result=None if row.result is None else json.loads(row.result),
            error_type=None if completed else row.error_type,
            error_message=None if completed else row.error_message,
            updated_at_ms=row.updated_at_ms,
            attempt_history=tuple(JobAttempt.from_row(attempt) for attempt in attempts),
            run_now_schedule_id=row.run_now_schedule_id,
            fingerprint=fingerprint_of_text(row.kind, row.payload),
            running_attempt=RunningAttempt.of(row),
            priority=row.priority,
            start_within_ms=row.start_within_ms,
            start_by_ms=row.start_by_ms,
            snoozes=row.snoozes,
            partition_key=row.partition_key,
            rate_class=row.rate_class,
        )


class LimitSource(StrEnum):
    """Where the attempt limit or timeout a job runs under comes from."""

    JOB = "job"
    """The job carries its own: given when it was enqueued, or what an attempt of
    it ran under (recorded when the attempt ended)."""
    HANDLER = "handler"
    """The job carries none: its kind's handler's, as registered in this process."""
    DEFAULT = "default"
    """The job carries none and this process has no handler for its kind:
    Headgate's default, which holds unless the handler of the process that runs
    the job sets its own (this process cannot know)."""


@dataclass(frozen=True)
class LimitInForce:
    value: int
    source: LimitSource

    @classmethod
    def of(cls, own: int | None, handler: int | None, default: int) -> LimitInForce:
        """The job's own value over its handler's over the default, as a worker
        takes them when it claims the job."""
        if own is not None:
            return cls(own, LimitSource.JOB)
        if handler is not None:
            return cls(handler, LimitSource.HANDLER)
        return cls(default, LimitSource.DEFAULT)


@dataclass(frozen=True)
class JobLimits:
    """The attempt limit and timeout a job runs under (`operator_of(hg).job_limits`)."""

    max_attempts: LimitInForce
    timeout_ms: LimitInForce


@dataclass(frozen=True)
class JobsPage:
    jobs: list[Job]
    next_cursor: str | None


@dataclass(frozen=True)
class DeclaredHandler:
    """A handler a declarations group's code registers, as the store keeps it:
    the defaults its jobs are enqueued with by a process without it."""

    kind: str
    queue: str
    priority: int
    start_within_ms: int | None
    partition_key: str | None
    rate_class: str | None
    declared_by: str
    """The declarations group (`RuntimeConfig.declarations_group`)."""
    host: str
    """The process (host:pid) that recorded it as it is."""
    declared_at_ms: int
    """Since when it is declared as it is."""

    @classmethod
    def from_row(cls, row: DeclaredHandlerRow) -> DeclaredHandler:
        d = row.declaration
        return cls(
            d.kind,
            d.queue,
            d.priority,
            d.start_within_ms,
            d.partition_key,
            d.rate_class,
            row.declared_by,
            row.host,
            row.declared_at_ms,
        )


@dataclass(frozen=True)
class WorkerStatus:
    """A live worker process."""

    worker_id: str
    host: str
    pid: int
    queues: dict[str, int]
    """queue -> capacity."""
    running: int
    overdue: int
    """Handlers still running past their timeout."""
    started_at_ms: int
    heartbeat_at_ms: int
    expires_at_ms: int
    running_job_ids: tuple[str, ...] = ()
    """The jobs it runs now (of the first RUNNING_SHOWN running jobs in the store)."""
    kinds: tuple[str, ...] | None = None
    """The job kinds it has handlers for, sorted; None when its build did not say."""


@dataclass(frozen=True)
class BulkResult:
    """What one bulk retry or cancel did (`hg.jobs.retry_many`, `cancel_many`)."""

    action: str
    """retry or cancel."""
    changed: int
    """How many jobs it retried or cancelled."""
    skipped: int
    """Matching jobs that changed state between the read and the write (claimed
    and ended, retried or cancelled by someone else): left as they are."""
    more: bool
    """More jobs match than `limit`: call again to take the next ones."""
    job_ids: tuple[str, ...]
    """The jobs it changed, newest first."""


QUARANTINE_SAMPLED = 200
"""Quarantined jobs `hg.quarantine.list` reads to name each entry's kind and a job."""

RUNNING_SHOWN = 200
"""Running jobs `hg.runtime.workers` reads to say which worker runs which."""


@dataclass(frozen=True)
class DrainSummary:
    """What `Headgate.drain` ran."""

    ran: int
    succeeded: int
    failed: int
    """Out of attempts."""
    retrying: int
    """Failed an attempt and will run again later."""
    snoozed: int = 0
    """Snoozed by its handler (`Snooze`): runs again later, its attempt not counted."""
    crashed: int = 0
    """Its child process died (`executor="process"`): a crash counted, as a
    worker's death is; runs again later, or is quarantined at the crash limit."""


@dataclass(frozen=True)
class EnqueueEvent:
    """One automatic tick attempt, as operators see it (`hg.schedules.enqueue_events`, the API's
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
class ScheduleRun:
    """What became of one of a schedule's runs: a tick's job, or an Enqueue now's
    (`manual`). Read from the schedule_runs projection and, until it settles,
    its job (`hg.schedules.runs`)."""

    job_id: str
    schedule_id: str
    tick_ms: int | None
    """The tick it ran for; None for an Enqueue now."""
    manual: bool
    outcome: str
    """enqueued (waiting), running, retrying (an attempt failed; it runs again),
    succeeded, failed, expired (not started by its deadline), cancelled or
    quarantined."""
    attempts: int
    """Attempts that ended."""
    enqueued_at_ms: int
    started_at_ms: int | None
    """When its last ended attempt started."""
    finished_at_ms: int | None
    """When it settled (or, retrying, when its last attempt ended)."""
    duration_ms: int | None
    """How long its last ended attempt ran."""
    error_type: str | None
    """Its last failed attempt's error type (the message and traceback are on the job)."""

    @classmethod
    def from_read(cls, read: RunRead) -> ScheduleRun:
        run, facts = read.run, read.facts()
        return cls(
            run.job_id,
            run.schedule_id,
            run.tick_ms,
            run.manual,
            facts.outcome,
            run.attempts,
            run.enqueued_at_ms,
            run.started_at_ms,
            run.finished_at_ms,
            facts.duration_ms,
            run.error_type,
        )


@dataclass(frozen=True)
class ScheduleRunsPage:
    runs: list[ScheduleRun]
    next_cursor: str | None


@dataclass(frozen=True)
class ScheduleHealth:
    """How a schedule is doing (`hg.schedules.health`), read from its newest
    100 runs and its row at `as_of_ms`.

    `state` is the first of these that holds: `paused`; `missing` (a tick has
    been due longer than `grace_ms` and none fired: nobody is the scheduler, or
    it is behind); `failing` (its newest settled run failed,
    `consecutive_failures` in a row; a cancelled run counts neither way);
    `late` (a tick's job has waited longer than `grace_ms` to start); else `ok`.
    """

    schedule_id: str
    state: str
    consecutive_failures: int
    last_success_ms: int | None
    last_failure_ms: int | None
    last_error_type: str | None
    duration_p50_ms: int | None
    duration_p95_ms: int | None
    """Of the recent runs that ran to an end (None: none has)."""
    last_run: ScheduleRun | None
    """Its newest run (None: it has none yet)."""
    runs_read: int
    """How many recent runs the figures come from (at most 100)."""
    as_of_ms: int
    grace_ms: int


@dataclass(frozen=True)
class SchedulesPage:
    schedules: list[Schedule]
    next_cursor: str | None


@dataclass(frozen=True)
class PutScheduleResult:
    """What `put_definition` did to one schedule."""

    schedule: Schedule
    outcome: str
    """"created" (new, or defined again after a delete), "updated" or "unchanged"
    (identical: nothing written)."""


@dataclass(frozen=True)
class PutSchedulesResult:
    """What `hg.schedules.put_many` did: each schedule's outcome, by id, in the call's order."""

    outcomes: dict[str, str]
    """id -> "created" (new, or defined again after a delete), "updated" (changed;
    an unchanged spec kept its phase) or "unchanged" (identical: nothing written)."""

    def _count(self, outcome: str) -> int:
        return sum(1 for value in self.outcomes.values() if value == outcome)

    @property
    def created(self) -> int:
        return self._count("created")

    @property
    def updated(self) -> int:
        return self._count("updated")

    @property
    def unchanged(self) -> int:
        return self._count("unchanged")


class EnqueueNowResult(NamedTuple):
    job_id: str
    replayed: bool


@dataclass(frozen=True)
class QuarantineEntry:
    """A quarantined kind+payload fingerprint: its jobs are refused and its
    schedules' ticks recorded `skipped/quarantined` until it is released."""

    fingerprint: str
    note: str
    """Why: the crash limit (naming the job) or an operator's note."""
    quarantined_at_ms: int
    kind: str | None = None
    """The kind of its newest job held in quarantine (`hg.quarantine.list`); None
    where none is among the newest QUARANTINE_SAMPLED quarantined jobs (a
    fingerprint quarantined by hand before any of its jobs crashed)."""
    sample_job_id: str | None = None
    """That job, to open: its payload and attempts say what crashed."""

    @classmethod
    def from_row(cls, row: QuarantineRow) -> QuarantineEntry:
        return cls(row.fingerprint, row.note, row.quarantined_at_ms)


@dataclass(frozen=True)
class QuarantinePage:
    entries: list[QuarantineEntry]
    next_cursor: str | None


@dataclass(frozen=True)
class QueueStatus:
    """A queue: whether it is paused, and its jobs waiting and running."""

    name: str
    paused: bool
    pending: int = 0
    running: int = 0
    paused_at_ms: int | None = None
    note: str = ""
    """The operator's note when it was paused."""


@dataclass(frozen=True)
class ConcurrencyLimitStatus:
    """A fleet-wide limit on running jobs, and how many of its scope run now.

    Each of `queue`, `kind` and `partition_key` is None for "any";
    `partition_key` "*" gives every partition key its own limit, and then
    `running_by_partition` says how many run per key (the busiest first)."""

    queue: str | None
    kind: str | None
    partition_key: str | None
    limit: int
    running: int
    """Jobs of its scope running now (under "*": across every key)."""
    set_at_ms: int
    running_by_partition: tuple[tuple[str, int], ...] = ()


def limit_statuses(state: LimitsState) -> list[ConcurrencyLimitStatus]:
    """Each concurrency limit with the jobs of its scope running now."""
    return [limit_status(row, state.running) for row in state.limits]


def limit_status(
    row: ConcurrencyLimitRow, running: Mapping[RunningKey, int]
) -> ConcurrencyLimitStatus:
    """A concurrency limit with the jobs of its scope among `running`."""
    limit = row.limit()
    by_key: dict[str, int] = {}
    total = 0
    for (queue, kind, partition_key), count in running.items():
        if limit.covers(queue, kind, partition_key):
            total += count
            if limit.per_partition and partition_key is not None:
                by_key[partition_key] = by_key.get(partition_key, 0) + count
    busiest = sorted(by_key.items(), key=lambda item: (-item[1], item[0]))
    return ConcurrencyLimitStatus(
        row.queue,
        row.kind,
        row.partition_key,
        row.max_running,
        total,
        row.set_at_ms,
        tuple(busiest[:MAX_PARTITIONS_SHOWN]),
    )


def rate_statuses(state: LimitsState) -> list[RateLimitStatus]:
    return [rate_status(row, state.started.get(row.rate_class, 0)) for row in state.rates]


def rate_status(row: RateLimitRow, started: int) -> RateLimitStatus:
    return RateLimitStatus(row.rate_class, row.max_starts, row.per_ms, started, row.set_at_ms)


MAX_PARTITIONS_SHOWN: Final = 20
"""A per-partition limit shows its busiest keys, at most this many."""


@dataclass(frozen=True)
class RateLimitStatus:
    """A rate class: at most `limit` of its jobs start in any `per_ms` window."""

    rate_class: str
    limit: int
    per_ms: int
    started: int
    """Its jobs started within the window that ends now."""
    set_at_ms: int


@dataclass(frozen=True)
class LeaseStatus:
    holder: str
    host: str
    pid: int
    term: int
    expires_at_ms: int


@dataclass(frozen=True)
class SchedulerHealth:
    """Whether anybody fires the ticks (`hg.runtime.scheduler_health`): `state` is
    `ok`, `no_scheduler` (schedules due past the grace and no process holds the
    scheduler lease) or `behind` (a holder, yet schedules due past the grace)."""

    state: str
    message: str
    holder: LeaseStatus | None
    """Who holds the scheduler lease, if anybody does."""
    oldest_due_ms: int | None
    """When the schedule due longest became due (None: none is due)."""
    behind_ms: int
    """How long it has waited (0 when none is due)."""
    grace_ms: int
    """How long a due schedule may wait before it is reported (a takeover's time)."""


@dataclass(frozen=True)
class Readiness:
    """Whether this Headgate can serve now: its store answers and is at this build's
    schema revision (what GET /readyz reports)."""

    ready: bool
    reason: str | None = None
    """Why not, as a stable code: `store_unreachable`, `store_closed`,
    `schema_behind`, `schema_too_new` or `schema_incomplete` (a table missing)."""
    detail: str | None = None
    """The error behind the reason, for the operator's log, its passwords masked:
    it may name the store's host and carry the driver's message."""
    schema_revision: int | None = None
    """The store's schema revision, when it answered with this build's."""
    error_type: str | None = None
    """The class of the error behind the reason, and of the driver's error behind
    that (`StoreUnavailable from OperationalError`)."""


@dataclass(frozen=True)
class UnservedWork:
    """Pending jobs of a kind on a queue that no live worker runs."""

    queue: str
    kind: str
    pending: int
    reason: str
    """In words: "no worker is running", "no live worker runs kind k on queue q"."""
