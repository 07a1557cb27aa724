"""The jobs read model: one row per job, with its periodic origin and where it
stands in its lifecycle.

Every event after a job's first sets columns whatever the row held (`changes`),
so the projector updates job rows without loading them: claims and
completions, the hot path of running jobs, cost one bulk update per batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from headgate._domain.claim_policy import start_deadline
from headgate._domain.events import (
    JOB_EVENTS,
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
    JobState,
    JobSucceeded,
    RecordedEvent,
)
from headgate._domain.options import DEFAULT_PRIORITY
from headgate._json import canonical_json_of_plain
from headgate._projections.base import Projection, fold_of


@dataclass(frozen=True)
class JobRow:
    job_id: str
    kind: str
    queue: str
    payload: str
    """Canonical JSON text."""
    state: str
    unique_key: str | None
    created_at_ms: int
    updated_at_ms: int
    periodic_schedule_id: str | None
    periodic_tick_ms: int | None
    attempts: int
    """Attempts that ran to an end (succeeded or failed); the running one is attempts + 1."""
    crash_count: int
    """Times its worker died while running it (counted apart from attempts)."""
    run_at_ms: int
    """When it may run (next): its enqueue time, a retry's backoff, or a scheduled time."""
    max_attempts: int | None
    timeout_ms: int | None
    worker_id: str | None
    """The worker running it (state running), else None."""
    deadline_ms: int | None
    """When the running attempt times out."""
    version: int
    """The job stream's version this row reflects: the next transition's expected version."""
    result: str | None
    """Canonical JSON text of a succeeded job's result."""
    error_type: str | None
    error_message: str | None
    """The last failed attempt's error (the message may be withheld: see JobAttemptFailed)."""
    run_now_schedule_id: str | None
    """The schedule whose Enqueue now made it."""
    priority: int = DEFAULT_PRIORITY
    """Higher is claimed first within its queue (chosen at enqueue: see JobOptions)."""
    serial: bool = False
    """A tick job claimed only once no earlier tick job of its schedule is pending
    or running (its schedule's overlap policy: see JobEnqueued)."""
    start_within_ms: int | None = None
    """Its own start_within_ms option, as enqueued (None: no deadline)."""
    start_by_ms: int | None = None
    """Its start deadline (from `start_within_ms`): claimed later, it expires
    instead of running. Cleared once it has started (None: none)."""
    snoozes: int = 0
    """Times its handler snoozed it (`Snooze`), which attempts do not count."""
    partition_key: str | None = None
    """Its share of the queue (fair share, per-partition limits); None: none."""
    rate_class: str | None = None
    """The rate limit it starts under; None: none."""
    fair_turn: int = 0
    """Its turn among its queue's partitions, claimed after priority (`fair_share`)."""
    trace_context: str | None = None
    """The trace its attempts continue or link to (`JobEnqueued.trace_context`)."""
    tags: str | None = None
    """Its tags option, as canonical JSON text (None: none)."""


def run_schedule_id(row: JobRow) -> str | None:
    """The schedule whose run this job is: its tick's, or its Enqueue now's; None
    for any other job. What its run-settling events carry (`RUN_EVENTS`)."""
    return row.periodic_schedule_id or row.run_now_schedule_id


def key(recorded: RecordedEvent) -> str | None:
    event = recorded.event
    if isinstance(event, JOB_EVENTS):
        return event.job_id
    return None


def creates(recorded: RecordedEvent) -> dict[str, Any] | None:
    """A job's stream starts with JobEnqueued, so that event always makes a new row."""
    event = recorded.event
    if not isinstance(event, JobEnqueued):
        return None
    options = event.options
    return {
        "job_id": event.job_id,
        "kind": event.kind,
        "queue": options.queue,
        "payload": canonical_json_of_plain(event.payload),
        "state": JobState.PENDING.value,
        "unique_key": options.unique_key,
        "created_at_ms": recorded.recorded_at_ms,
        "updated_at_ms": recorded.recorded_at_ms,
        "periodic_schedule_id": event.periodic_schedule_id,
        "periodic_tick_ms": event.periodic_tick_ms,
        "attempts": 0,
        "crash_count": 0,
        "run_at_ms": recorded.recorded_at_ms if options.run_at_ms is None else options.run_at_ms,
        "max_attempts": options.max_attempts,
        "timeout_ms": options.timeout_ms,
        "worker_id": None,
        "deadline_ms": None,
        "version": recorded.version,
        "result": None,
        "error_type": None,
        "error_message": None,
        "run_now_schedule_id": event.run_now_schedule_id,
        "priority": DEFAULT_PRIORITY if options.priority is None else options.priority,
        "serial": event.serial,
        "start_within_ms": options.start_within_ms,
        "start_by_ms": start_by_ms(event, recorded.recorded_at_ms),
        "snoozes": 0,
        "partition_key": options.partition_key,
        "rate_class": options.rate_class,
        "fair_turn": event.fair_turn,
        "trace_context": event.trace_context,
        "tags": None if options.tags is None else canonical_json_of_plain(list(options.tags)),
    }


def start_by_ms(event: JobEnqueued, recorded_at_ms: int) -> int | None:
    """When the job must have started (`claim_policy.start_deadline`)."""
    options = event.options
    return start_deadline(
        options.start_within_ms, event.periodic_tick_ms, options.run_at_ms, recorded_at_ms
    )


def _ran_under(event: JobSucceeded | JobAttemptFailed | JobSnoozed) -> dict[str, int]:
    """The attempt limit and timeout an attempt ran under (its job's own, else its
    handler's): the job keeps them from then on, so every process shows what the
    worker ran it with (None in logs before they were recorded: nothing changes)."""
    ran: dict[str, int] = {}
    if event.max_attempts is not None:
        ran["max_attempts"] = event.max_attempts
    if event.timeout_ms is not None:
        ran["timeout_ms"] = event.timeout_ms
    return ran


_OFF_WORKER: Final = {"worker_id": None, "deadline_ms": None}
_STARTED: Final = {"start_by_ms": None}
"""Set by every event that ends a started attempt: a start deadline holds only
until the job first starts."""
CLAIM_COLUMNS: Final = ("worker_id", "deadline_ms", "updated_at_ms")
"""What a worker's claim sets on a job's row besides its state (running). A claim
is not an event (`JobQueue.claim`), so no fold of the log makes it."""


def as_claimed(folded: Mapping[str, Any], live: Mapping[str, Any] | None) -> dict[str, Any]:
    """A job row folded from the log, with the claim of its live row when the live
    job runs at the folded row's version: the row a rebuild keeps (see
    `_store/sql/claims.py`), which verify and the tests compare with."""
    row = dict(folded)
    if (
        live is not None
        and live["state"] == JobState.RUNNING.value
        and row["state"] == JobState.PENDING.value
        and row["version"] == live["version"]
    ):
        row["state"] = JobState.RUNNING.value
        row.update({column: live[column] for column in CLAIM_COLUMNS})
    return row


def changes(recorded: RecordedEvent) -> dict[str, Any] | None:
    """The columns a later event sets, or None for an event that does not touch a
    job's row (JobEnqueued creates it: see `creates`). Never from the event's
    position: the SQL store folds an attempt's end into its row before the
    event has one (the row's compare-and-set decides whether it gets one)."""
    event = recorded.event
    delta: dict[str, Any]
    if isinstance(event, JobClaimed):
        delta = {
            "state": JobState.RUNNING.value,
            "worker_id": event.worker_id,
            "deadline_ms": event.deadline_ms,
        }
    elif isinstance(event, JobSucceeded):
        delta = {
            "state": JobState.COMPLETED.value,
            "attempts": event.attempt,
            "result": canonical_json_of_plain(event.result),
            **_OFF_WORKER,
            **_ran_under(event),
        }
    elif isinstance(event, JobAttemptFailed):
        delta = {
            "attempts": event.attempt,
            "error_type": event.error_type,
            "error_message": event.error_message,
            **_OFF_WORKER,
            **_STARTED,
            **_ran_under(event),
        }
        if event.retry_at_ms is None:
            delta["state"] = JobState.FAILED.value
        else:
            delta["state"] = JobState.PENDING.value
            delta["run_at_ms"] = event.retry_at_ms
    elif isinstance(event, JobSnoozed):
        delta = {
            "state": JobState.PENDING.value,
            "run_at_ms": event.run_at_ms,
            "snoozes": event.snoozes,
            **_OFF_WORKER,
            **_STARTED,
            **_ran_under(event),
        }
    elif isinstance(event, JobReleased):
        delta = {"state": JobState.PENDING.value, **_OFF_WORKER, **_STARTED}
    elif isinstance(event, JobAbandoned):
        delta = {
            "state": JobState.PENDING.value,
            "crash_count": event.crash_count,
            **_OFF_WORKER,
            **_STARTED,
        }
    elif isinstance(event, JobQuarantined):
        delta = {
            "state": JobState.QUARANTINED.value,
            "crash_count": event.crash_count,
            **_OFF_WORKER,
        }
    elif isinstance(event, JobCancelled):
        delta = {"state": JobState.CANCELLED.value, **_OFF_WORKER}
    elif isinstance(event, JobExpired):
        delta = {"state": JobState.EXPIRED.value, **_OFF_WORKER}
    elif isinstance(event, JobRetried):
        delta = {
            "state": JobState.PENDING.value,
            "attempts": 0,
            "crash_count": 0,
            "snoozes": 0,
            "run_at_ms": recorded.recorded_at_ms,
            "result": None,
            "error_type": None,
            "error_message": None,
            **_OFF_WORKER,
            **_STARTED,
        }
    elif isinstance(event, JobFinished):
        delta = {"state": event.state.value, **_OFF_WORKER}
    else:
        return None
    delta["version"] = recorded.version
    delta["updated_at_ms"] = recorded.recorded_at_ms
    return delta


JOBS: Projection[JobRow] = Projection(
    name="jobs",
    table="jobs",
    row_type=JobRow,
    key_column="job_id",
    key=key,
    apply=fold_of(JobRow, creates, changes),
    creates=creates,
    changes=changes,
)
