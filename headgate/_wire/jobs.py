"""The bodies of /jobs: a job in (its options derived from `JobOptions`,
`derived`), a job and its attempts out, counts and bulk actions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, JsonValue, StrictInt, StrictStr, create_model

from headgate._domain.lifecycle import BULK_MAX, JobState
from headgate._domain.spec import MAX_INSTANT_MS
from headgate._model import BulkResult, Job, JobAttempt, RunningAttempt
from headgate._wire.derived import Strict, job_options_fields

if TYPE_CHECKING:
    _JobOptionsIn = BaseModel
else:
    _JobOptionsIn = create_model("_JobOptionsIn", __base__=Strict, **job_options_fields())


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
