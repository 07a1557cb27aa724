"""The bodies of /jobs: a job in (its options derived from `JobOptions`,
`derived`), a job and its attempts out, counts and bulk actions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, JsonValue, StrictInt, StrictStr, create_model

from headgate._domain.lifecycle import BULK_MAX, AttemptOutcome, JobState
from headgate._domain.read_fields import JOB_READ
from headgate._domain.spec import MAX_INSTANT_MS
from headgate._model import BulkResult, Job, JobAttempt, RunningAttempt
from headgate._wire.derived import Strict, job_options_fields, read_fields

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
    outcome: AttemptOutcome = Field(description="How it ended: " + ", ".join(AttemptOutcome))
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


_JOB_PARTS: dict[str, tuple[Any, dict[str, Any]]] = {
    "state": (JobState, {}),
    "periodic_origin": (OriginOut | None, {}),
    "waiting_for": (list[str], {"default_factory": list}),
    "attempt_history": (list[AttemptOut], {}),
    "running_attempt": (RunningAttemptOut | None, {"default": None}),
}
"""The fields of a job whose JSON is a structure of its own (the rest are typed
as `Job` types them)."""

if TYPE_CHECKING:
    _JobFields = BaseModel
else:
    _JobFields = create_model(
        "_JobFields", **read_fields(JOB_READ, Job, _JOB_PARTS, options_typed_by_domain=False)
    )


class JobOut(_JobFields):
    """A job: every field of `Job` (`JOB_READ`), described as the domain describes it."""

    @classmethod
    def of(cls, job: Job) -> JobOut:
        origin = job.periodic_origin
        values = {field.name: getattr(job, field.name) for field in JOB_READ}
        values["periodic_origin"] = (
            None
            if origin is None
            else OriginOut(schedule_id=origin.schedule_id, tick_ms=origin.tick_ms)
        )
        values["attempt_history"] = [AttemptOut.of(attempt) for attempt in job.attempt_history]
        running = job.running_attempt
        values["running_attempt"] = None if running is None else RunningAttemptOut.of(running)
        return cls.model_validate(values)


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
