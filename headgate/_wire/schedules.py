"""Request and response bodies of the control API (they also make the OpenAPI schema)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, cast

from pydantic import BaseModel, Field, JsonValue, StrictInt, StrictStr, create_model

from headgate._domain.activity import ActivityPoint
from headgate._domain.decisions import Reason
from headgate._domain.describe import describe, missed_run_label
from headgate._domain.lifecycle import BULK_MAX, JobState
from headgate._domain.options import SCHEDULE_FIELDS
from headgate._domain.spec import MAX_INSTANT_MS, InvalidSpec, interval_problem, parse_spec
from headgate._model import (
    BulkResult,
    ConcurrencyLimitStatus,
    DeclaredHandler,
    EnqueueEvent,
    Job,
    JobAttempt,
    LeaseStatus,
    QuarantineEntry,
    QueueStatus,
    RateLimitStatus,
    RunningAttempt,
    Schedule,
    ScheduleHealth,
    SchedulerHealth,
    ScheduleRun,
    UnservedWork,
    WorkerStatus,
)
from headgate._wire.derived import (
    Strict,
    job_options_fields,
    out_fields,
    schedule_body,
    schedule_changes_body,
)

if TYPE_CHECKING:
    ScheduleIn = BaseModel
    ScheduleItemIn = BaseModel
    ScheduleChangesIn = BaseModel
    _ScheduleFields = BaseModel
    _JobOptionsIn = BaseModel
else:
    ScheduleIn = schedule_body("ScheduleIn")
    ScheduleItemIn = schedule_body(
        "ScheduleItemIn",
        extra={"id": (StrictStr, Field(description="The schedule's id, as in PUT /periodic/{id}"))},
    )
    ScheduleChangesIn = schedule_changes_body("ScheduleChangesIn")
    _ScheduleFields = create_model("_ScheduleFields", **out_fields(SCHEDULE_FIELDS))
    _JobOptionsIn = create_model("_JobOptionsIn", __base__=Strict, **job_options_fields())


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
    """A schedule: its definition (every field PUT takes) and where it stands."""

    id: str
    next_run_ms: int
    last_enqueued_ms: int | None
    finished: bool = Field(description="Its next tick is past end_at_ms: no tick is left")
    next_due_at_ms: int | None = Field(
        description="When next_run_ms is enqueued (its jitter or a retry included); "
        "null once finished"
    )
    declared_in_code: bool = Field(
        description="The host's code declares it (Headgate.periodic): the code owns its "
        "definition, and what operators change is an override"
    )
    overrides: list[str] = Field(
        description="The fields operators changed from what the code declares; they survive "
        "deploys until DELETE /periodic/{id}/overrides"
    )
    undeclared_at_ms: int | None = Field(
        description="When a runtime started whose code no longer declares it (null: declared, "
        "or never was)"
    )
    health: ScheduleHealthOut | None = Field(
        default=None,
        description="How it is doing, from its newest runs (GET /periodic and "
        "GET /periodic/{id}; null in the answers of writes)",
    )
    last_run: ScheduleRunOut | None = Field(
        default=None,
        description="Its newest run and what became of it (null: none yet, or the answer "
        "of a write)",
    )

    @classmethod
    def of(cls, schedule: Schedule, health: ScheduleHealth | None = None) -> ScheduleOut:
        fields = {name: getattr(schedule, name) for name in SCHEDULE_FIELDS}
        shown_health = None if health is None else ScheduleHealthOut.of(health)
        last_run = None if health is None or health.last_run is None else health.last_run
        return cls.model_validate(
            {
                **fields,
                "id": schedule.id,
                "next_run_ms": schedule.next_run_ms,
                "last_enqueued_ms": schedule.last_enqueued_ms,
                "finished": schedule.finished,
                "next_due_at_ms": schedule.next_due_at_ms,
                "declared_in_code": schedule.declared_in_code,
                "overrides": list(schedule.overrides),
                "undeclared_at_ms": schedule.undeclared_at_ms,
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


class RunOut(BaseModel):
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


class OriginIn(Strict):
    schedule_id: StrictStr | None = None
    tick_ms: StrictInt | None = Field(None, ge=0, le=MAX_INSTANT_MS)


class OriginOut(BaseModel):
    schedule_id: str
    tick_ms: int


class JobIn(_JobOptionsIn):
    """A job: its kind and payload, and any of its options (`JobOptions`)."""

    kind: StrictStr
    payload: JsonValue = None
    periodic_origin: OriginIn | None = None


class AttemptOut(BaseModel):
    attempt: int = Field(
        description="Its number; for a crash the attempt it ended (0 if not recorded); "
        "0 for a release, and for a retry (after which the numbers start again from 1)"
    )
    outcome: Literal[
        "succeeded",
        "failed",
        "timed_out",
        "snoozed",
        "released",
        "crashed",
        "quarantined",
        "retried",
    ]
    worker_id: str | None
    started_at_ms: int | None = Field(
        description="When its handler started; for a crash, when the attempt was claimed"
    )
    ended_at_ms: int = Field(description="When it ended; for a retry, when it was asked for")
    duration_ms: int | None = Field(
        default=None, description="How long its handler ran, when it started one"
    )
    error_type: str | None
    error_message: str | None = Field(description="Truncated; absent when texts are not stored")
    traceback: str | None = Field(
        default=None,
        description="Where a failure was raised, as Python prints it (bounded; for a timeout, "
        "where the handler was at its deadline). It holds what the handler's code put in "
        "exception messages, unless the host redacts them",
    )

    @classmethod
    def of(cls, attempt: JobAttempt) -> AttemptOut:
        return cls.model_validate({**attempt.__dict__, "duration_ms": attempt.duration_ms})


class RunningAttemptOut(BaseModel):
    attempt: int
    worker_id: str | None
    started_at_ms: int = Field(description="When it was claimed")
    deadline_ms: int | None = Field(description="When it times out")

    @classmethod
    def of(cls, attempt: RunningAttempt) -> RunningAttemptOut:
        return cls.model_validate(attempt.__dict__)


class JobOut(BaseModel):
    id: str
    kind: str
    queue: str
    payload: JsonValue
    state: JobState
    unique_key: str | None
    created_at_ms: int
    periodic_origin: OriginOut | None
    run_now_schedule_id: str | None = Field(
        description="The schedule whose Enqueue now made it (a tick's job has periodic_origin)"
    )
    attempts: int = Field(description="Attempts that ran to an end")
    max_attempts: int | None = Field(description="None: its handler's")
    crash_count: int = Field(description="Times a worker died running it")
    snoozes: int = Field(
        description="Times its handler snoozed it (raise Snooze): attempts do not count them"
    )
    run_at_ms: int = Field(description="When it runs (next)")
    timeout_ms: int | None
    priority: int = Field(description="Higher is claimed first within its queue")
    start_within_ms: int | None = Field(
        description="Not started this long after it was due (a tick job: its tick), it "
        "expires instead of running; null: no deadline"
    )
    start_by_ms: int | None = Field(
        description="Its start deadline (from start_within_ms): not started by then, it is "
        "recorded expired instead of running; null: none, or it has started"
    )
    partition_key: str | None = Field(
        default=None, description="Its share of the queue (fair share, per-partition limits)"
    )
    rate_class: str | None = Field(default=None, description="The rate limit it starts under")
    waiting_for: list[str] = Field(
        default_factory=list,
        description="Why a due pending job has not started (a paused queue, a full "
        "concurrency limit, a used-up rate class); in a job's own read, empty in lists",
    )
    worker_id: str | None = Field(description="The worker running it, while it runs")
    result: JsonValue = Field(description="What its handler returned, once completed")
    error_type: str | None = Field(
        description="The newest failed attempt's exception type; null once the job has "
        "completed (each failed attempt keeps its error in attempt_history)"
    )
    error_message: str | None
    updated_at_ms: int
    attempt_history: list[AttemptOut] = Field(
        description="The newest ended attempts, newest first (in a job's own read, empty in lists)"
    )
    running_attempt: RunningAttemptOut | None = Field(
        default=None, description="The attempt under way, while the job is running"
    )
    fingerprint: str = Field(
        description="What quarantine matches (its kind and payload): PUT /quarantine/{fp} "
        "refuses jobs like it, DELETE releases them"
    )

    @classmethod
    def of(cls, job: Job) -> JobOut:
        origin = job.periodic_origin
        return cls(
            id=job.id,
            kind=job.kind,
            queue=job.queue,
            payload=job.payload,
            state=JobState(job.state),
            unique_key=job.unique_key,
            created_at_ms=job.created_at_ms,
            periodic_origin=None
            if origin is None
            else OriginOut(schedule_id=origin.schedule_id, tick_ms=origin.tick_ms),
            run_now_schedule_id=job.run_now_schedule_id,
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            crash_count=job.crash_count,
            snoozes=job.snoozes,
            run_at_ms=job.run_at_ms,
            timeout_ms=job.timeout_ms,
            priority=job.priority,
            start_within_ms=job.start_within_ms,
            start_by_ms=job.start_by_ms,
            partition_key=job.partition_key,
            rate_class=job.rate_class,
            waiting_for=list(job.waiting_for),
            worker_id=job.worker_id,
            result=job.result,
            error_type=job.error_type,
            error_message=job.error_message,
            updated_at_ms=job.updated_at_ms,
            attempt_history=[AttemptOut.of(attempt) for attempt in job.attempt_history],
            running_attempt=None
            if job.running_attempt is None
            else RunningAttemptOut.of(job.running_attempt),
            fingerprint=job.fingerprint,
        )


class JobList(BaseModel):
    jobs: list[JobOut]
    next_cursor: str | None


class JobCountsOut(BaseModel):
    counts: dict[str, int] = Field(
        description="Per state, the jobs GET /jobs shows with these filters, each up to `cap`"
    )
    cap: int = Field(description="Counting stops here: a count equal to it means that many or more")


class JobsBulkIn(Strict):
    """The jobs GET /jobs shows with these filters, newest first, up to `limit`."""

    state: JobState = Field(description="Required: one state the action allows")
    queue: StrictStr | None = Field(None, max_length=255)
    kind: StrictStr | None = Field(None, max_length=255)
    schedule_id: StrictStr | None = Field(None, max_length=255)
    search: StrictStr | None = Field(
        None,
        max_length=255,
        description="A job id, a unique key, or (with schedule_id) an idempotency key",
    )
    limit: StrictInt = Field(BULK_MAX, ge=1, le=BULK_MAX, description="At most this many jobs")


class JobsBulkOut(BaseModel):
    action: str = Field(description="retry or cancel")
    changed: int = Field(description="Jobs retried or cancelled")
    skipped: int = Field(description="Matching jobs that changed state meanwhile: left as they are")
    more: bool = Field(description="More jobs match than `limit`: send again for the next ones")
    job_ids: list[str] = Field(description="The jobs changed, newest first")

    @classmethod
    def of(cls, result: BulkResult) -> JobsBulkOut:
        return cls(**{**result.__dict__, "job_ids": list(result.job_ids)})


class WorkerOut(BaseModel):
    worker_id: str
    host: str
    pid: int
    queues: dict[str, int] = Field(description="queue -> capacity")
    kinds: list[str] | None = Field(
        description="The kinds it has handlers for; null when its build did not say"
    )
    running: int
    running_job_ids: list[str] = Field(description="Jobs it runs now (the first 200 in all)")
    overdue: int = Field(description="Handlers still running past their timeout")
    started_at_ms: int
    heartbeat_at_ms: int
    heartbeat_age_ms: int
    expires_at_ms: int

    @classmethod
    def of(cls, worker: WorkerStatus, now_ms: int) -> WorkerOut:
        return cls(
            **{
                **worker.__dict__,
                "running_job_ids": list(worker.running_job_ids),
                "kinds": None if worker.kinds is None else list(worker.kinds),
            },
            heartbeat_age_ms=max(0, now_ms - worker.heartbeat_at_ms),
        )


class LeaseOut(BaseModel):
    holder: str
    host: str
    pid: int
    term: int
    expires_at_ms: int

    @classmethod
    def of(cls, lease: LeaseStatus) -> LeaseOut:
        return cls.model_validate(lease.__dict__)


class SchedulerHealthOut(BaseModel):
    state: Literal["ok", "no_scheduler", "behind"] = Field(
        description="no_scheduler: schedules due past the grace and no process holds the "
        "scheduler lease; behind: a holder, yet schedules due past the grace"
    )
    message: str = Field(description="What it means, for an operator")
    holder: LeaseOut | None = Field(description="The scheduler lease's holder; null: nobody")
    oldest_due_ms: int | None = Field(
        description="When the schedule due longest became due; null: none is due"
    )
    behind_ms: int = Field(description="How long it has waited (0: none is due)")
    grace_ms: int = Field(description="How long a due schedule may wait before it is reported")

    @classmethod
    def of(cls, health: SchedulerHealth) -> SchedulerHealthOut:
        return cls(
            state=health.state,  # type: ignore[arg-type]
            message=health.message,
            holder=None if health.holder is None else LeaseOut.of(health.holder),
            oldest_due_ms=health.oldest_due_ms,
            behind_ms=health.behind_ms,
            grace_ms=health.grace_ms,
        )


class WorkersOut(BaseModel):
    workers: list[WorkerOut]
    scheduler: LeaseOut | None = Field(description="The scheduler lease's holder; null: nobody")


class HandlerOut(BaseModel):
    kind: str
    queue: str = Field(
        description="Where its jobs go when enqueued by a process without its handler"
    )
    priority: int
    start_within_ms: int | None
    partition_key: str | None
    rate_class: str | None
    declared_by: str = Field(description="The declarations group of the code that has it")
    host: str = Field(description="The process (host:pid) that recorded it as it is")
    declared_at_ms: int = Field(description="Since when it is declared as it is")

    @classmethod
    def of(cls, handler: DeclaredHandler) -> HandlerOut:
        return cls.model_validate(handler.__dict__)


class HandlerList(BaseModel):
    handlers: list[HandlerOut] = Field(description="By kind, then declarations group")


class QuarantineIn(Strict):
    note: StrictStr = ""


class QuarantineOut(BaseModel):
    fingerprint: str
    note: str = Field(description="Why: the crash limit (naming the job) or an operator's note")
    quarantined_at_ms: int
    kind: str | None = Field(
        None, description="The kind of its newest job held in quarantine; null if none is"
    )
    sample_job_id: str | None = Field(None, description="That job (GET /jobs/{job_id})")

    @classmethod
    def of(cls, entry: QuarantineEntry) -> QuarantineOut:
        return cls.model_validate(entry.__dict__)


class QuarantineList(BaseModel):
    entries: list[QuarantineOut]
    next_cursor: str | None


class QueuePauseIn(Strict):
    note: StrictStr = Field("", description="Why (shown with the queue while it is paused)")


class QueueOut(BaseModel):
    name: str
    paused: bool = Field(description="Nobody claims its jobs while it is paused")
    pending: int = Field(description="Its jobs waiting (due or scheduled)")
    running: int
    paused_at_ms: int | None
    note: str = Field(description="The note given when it was paused")

    @classmethod
    def of(cls, status: QueueStatus) -> QueueOut:
        return cls.model_validate(status.__dict__)


def queue_weight(status: QueueStatus) -> float:
    """Which queues a bounded list keeps: the paused ones, then the busiest."""
    return (float("inf") if status.paused else 0.0) + status.pending + status.running


class QueueList(BaseModel):
    queues: list[QueueOut]
    more: int = Field(
        default=0, description="Queues left out: each has fewer jobs than those listed"
    )


class LimitIn(Strict):
    queue: StrictStr | None = Field(None, description="Its queue (null: any)")
    kind: StrictStr | None = Field(None, description="Its kind (null: any)")
    partition_key: StrictStr | None = Field(
        None, description='Its partition key (null: any job; "*": each key has the limit)'
    )
    limit: StrictInt = Field(description="At most this many running at once, fleet-wide")


class PartitionRunningOut(BaseModel):
    partition_key: str
    running: int


class ConcurrencyLimitOut(BaseModel):
    queue: str | None = Field(description="null: any queue")
    kind: str | None = Field(description="null: any kind")
    partition_key: str | None = Field(
        description='null: any job; "*": every partition key has the limit on its own'
    )
    limit: int
    running: int = Field(description='Jobs of its scope running now (under "*": all keys)')
    set_at_ms: int
    running_by_partition: list[PartitionRunningOut] = Field(
        description='Under "*": the busiest partition keys and their running jobs'
    )

    @classmethod
    def of(cls, status: ConcurrencyLimitStatus) -> ConcurrencyLimitOut:
        return cls(
            queue=status.queue,
            kind=status.kind,
            partition_key=status.partition_key,
            limit=status.limit,
            running=status.running,
            set_at_ms=status.set_at_ms,
            running_by_partition=[
                PartitionRunningOut(partition_key=key, running=count)
                for key, count in status.running_by_partition
            ],
        )


class LimitList(BaseModel):
    limits: list[ConcurrencyLimitOut]


class UnservedOut(BaseModel):
    queue: str
    kind: str
    pending: int = Field(description="Its pending jobs, which wait until a worker runs them")
    reason: str

    @classmethod
    def of(cls, work: UnservedWork) -> UnservedOut:
        return cls(queue=work.queue, kind=work.kind, pending=work.pending, reason=work.reason)


class UnservedList(BaseModel):
    unserved: list[UnservedOut]
    more: int = Field(default=0, description="(queue, kind) left out: each has fewer pending jobs")


class RateLimitIn(Strict):
    limit: StrictInt = Field(description="At most this many of its jobs start ...")
    per_ms: StrictInt = Field(description="... in any window this long (a sliding window)")


class RateLimitOut(BaseModel):
    rate_class: str
    limit: int
    per_ms: int
    started: int = Field(description="Its jobs started within the window ending now")
    set_at_ms: int

    @classmethod
    def of(cls, status: RateLimitStatus) -> RateLimitOut:
        return cls.model_validate(status.__dict__)


class RateLimitList(BaseModel):
    rate_limits: list[RateLimitOut]


class ActivityPointOut(BaseModel):
    minute_ms: int = Field(description="The minute's start, epoch ms")
    series: str = Field(
        description="ticks, jobs, tick_lateness_ms, pickup_ms, queue_depth, oldest_pending_s, "
        "limit_running or limit"
    )
    key: str = Field(
        description="An outcome (ticks, jobs), p50 or p99 (latencies), a queue, or a limit's scope"
    )
    value: float

    @classmethod
    def of(cls, point: ActivityPoint) -> ActivityPointOut:
        return cls.model_validate(point.__dict__)


class ActivityList(BaseModel):
    points: list[ActivityPointOut] = Field(description="Oldest minute first")


class SpecPreview(BaseModel):
    valid: bool = Field(description="Whether a schedule may have it here (min_interval_ms too)")
    error: str | None
    spec: str | None = Field(None, description="The normalised spec")
    description: str | None
    next_ticks_ms: list[int]
    min_interval_ms: int = Field(description="This server's minimum interval between ticks")


class ErrorOut(BaseModel):
    error: str


def preview(spec: str, now_ms: int, min_interval_ms: int, count: int = 5) -> SpecPreview:
    """What PUT /periodic/{id} would make of `spec`: its normal form and next
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


def policy_label(schedule: Schedule) -> str:
    return missed_run_label(schedule.on_missed, schedule.backfill_limit)
