"""Each job's attempts, newest first: one row per attempt's end, and one per
operator's retry.

An attempt ends when its handler returns (succeeded), raises or runs past its
deadline (failed, timed_out), asks to run again later (snoozed, its number
then taken again by the next attempt), when its worker stops and gives it back
(released) or dies (crashed), or when the crash that ends it quarantines the
job (quarantined). A retry (retried) starts the attempt numbers again from 1,
so its row is what tells the second run's attempt 1 from the first's. Rows
are keyed by the event's log position and go with their job when compaction
removes it; reads show a job's newest 20.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from headgate._domain.events import (
    JobAbandoned,
    JobAttemptFailed,
    JobQuarantined,
    JobReleased,
    JobRetried,
    JobSnoozed,
    JobSucceeded,
    RecordedEvent,
)
from headgate._domain.lifecycle import AttemptOutcome
from headgate._projections.base import Projection

SHOWN_PER_JOB: Final = 20


@dataclass(frozen=True)
class JobAttemptRow:
    event_id: int
    job_id: str
    attempt: int
    """The attempt's number; for a crash, the attempt it ended (0 where the
    crash did not record it, before JobAbandoned v2); 0 for a release, which
    does not say, and for a retry."""
    outcome: str
    """succeeded, failed, timed_out, snoozed, released, crashed, quarantined or retried."""
    worker_id: str | None
    started_at_ms: int | None
    """When the handler started; for a crash, when its attempt was claimed."""
    ended_at_ms: int
    """When the attempt ended; for a retry, when it was asked for."""
    error_type: str | None
    error_message: str | None
    traceback: str | None = None
    """A failure's traceback (bounded), None for every other end."""


_ENDS: Final = (
    JobSucceeded,
    JobAttemptFailed,
    JobReleased,
    JobAbandoned,
    JobQuarantined,
    JobRetried,
    JobSnoozed,
)


def key(recorded: RecordedEvent) -> int | None:
    return recorded.position if isinstance(recorded.event, _ENDS) else None


def creates(recorded: RecordedEvent) -> dict[str, Any] | None:
    event = recorded.event
    row: dict[str, Any] = {
        "event_id": recorded.position,
        "ended_at_ms": recorded.recorded_at_ms,
        "started_at_ms": None,
        "error_type": None,
        "error_message": None,
        "traceback": None,
    }
    if isinstance(event, JobSucceeded):
        row.update(
            job_id=event.job_id,
            attempt=event.attempt,
            outcome=AttemptOutcome.SUCCEEDED.value,
            worker_id=event.worker_id,
            started_at_ms=event.started_at_ms,
        )
    elif isinstance(event, JobAttemptFailed):
        row.update(
            job_id=event.job_id,
            attempt=event.attempt,
            outcome=(AttemptOutcome.TIMED_OUT if event.timed_out else AttemptOutcome.FAILED).value,
            worker_id=event.worker_id,
            started_at_ms=event.started_at_ms,
            error_type=event.error_type,
            error_message=event.error_message,
            traceback=event.traceback,
        )
    elif isinstance(event, JobSnoozed):
        row.update(
            job_id=event.job_id,
            attempt=event.attempt,
            outcome=AttemptOutcome.SNOOZED.value,
            worker_id=event.worker_id,
            started_at_ms=event.started_at_ms,
        )
    elif isinstance(event, JobReleased):
        row.update(
            job_id=event.job_id,
            attempt=0,
            outcome=AttemptOutcome.RELEASED.value,
            worker_id=event.worker_id,
        )
    elif isinstance(event, JobAbandoned):
        row.update(
            job_id=event.job_id,
            attempt=event.attempt or 0,
            outcome=AttemptOutcome.CRASHED.value,
            worker_id=event.worker_id,
            started_at_ms=event.claimed_at_ms,
        )
    elif isinstance(event, JobQuarantined):
        row.update(
            job_id=event.job_id,
            attempt=event.attempt or 0,
            outcome=AttemptOutcome.QUARANTINED.value,
            worker_id=None,
            started_at_ms=event.claimed_at_ms,
        )
    elif isinstance(event, JobRetried):
        row.update(
            job_id=event.job_id, attempt=0, outcome=AttemptOutcome.RETRIED.value, worker_id=None
        )
    else:
        return None
    return row


def apply(row: JobAttemptRow | None, recorded: RecordedEvent) -> JobAttemptRow | None:
    created = creates(recorded)
    return row if created is None else JobAttemptRow(**created)


JOB_ATTEMPTS: Projection[JobAttemptRow] = Projection(
    name="job_attempts",
    table="job_attempts",
    row_type=JobAttemptRow,
    key_column="event_id",
    key=key,
    apply=apply,
    creates=creates,
    append_only=True,
)
