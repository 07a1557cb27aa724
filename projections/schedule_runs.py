"""Each schedule's runs: what became of the job each tick (or Enqueue now) made.

One row per job of a schedule, keyed by the job's id, made when the job is
enqueued and updated by the events that settle or reopen it (`RUN_EVENTS`,
which say the schedule they belong to, so no other job's events touch this
table). The row orders by its enqueue's log position, which survives a
rebuild unchanged and doubles as the paging cursor.

A claim is not an event (`JobQueue.claim`), so a run that has started but not
ended reads `enqueued` here; readers take a live run's state from its job
(`headgate._domain.schedule_health`). Rows go with their jobs' streams:
compaction keeps each schedule's newest `runs_per_schedule` runs' jobs past
the finished-job retention, so the history and the health it shows are what
a fold of the log makes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from headgate._domain.events import (
    RUN_EVENTS,
    JobAttemptFailed,
    JobCancelled,
    JobEnqueued,
    JobExpired,
    JobFinished,
    JobQuarantined,
    JobRetried,
    JobState,
    JobSucceeded,
    RecordedEvent,
)
from headgate._projections.base import Projection, fold_of

KEEP_PER_SCHEDULE: Final = 100
"""Runs shown per schedule, newest first; compaction keeps at least these."""


class RunState(StrEnum):
    """What became of a schedule's run, as its history says."""

    ENQUEUED = "enqueued"
    """Its job waits, or runs (its job says which)."""
    RETRYING = "retrying"
    """An attempt failed; the job runs again later."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    """Out of attempts (or an error its handler does not retry)."""
    EXPIRED = "expired"
    """Not started by its start deadline."""
    CANCELLED = "cancelled"
    QUARANTINED = "quarantined"
    """Held: it crashed its workers, or its kind and payload did."""


SETTLED_STATES: Final = frozenset(
    {
        RunState.SUCCEEDED,
        RunState.FAILED,
        RunState.EXPIRED,
        RunState.CANCELLED,
        RunState.QUARANTINED,
    }
)
FAILED_STATES: Final = frozenset({RunState.FAILED, RunState.EXPIRED, RunState.QUARANTINED})
"""Settled runs that count against a schedule's health (a cancel does not)."""

_FINISHED_AS: Final = {
    JobState.COMPLETED: RunState.SUCCEEDED,
    JobState.FAILED: RunState.FAILED,
    JobState.CANCELLED: RunState.CANCELLED,
}


@dataclass(frozen=True)
class ScheduleRunRow:
    job_id: str
    schedule_id: str
    position: int
    """The log position of its JobEnqueued: the history's order and cursor."""
    tick_ms: int | None
    """The tick it ran for; None for an Enqueue now."""
    manual: bool
    """Made by an operator's Enqueue now rather than a tick."""
    enqueued_at_ms: int
    state: str
    """A `RunState` value."""
    attempts: int
    """Attempts that ended (succeeded or failed)."""
    started_at_ms: int | None
    """When its last ended attempt started."""
    finished_at_ms: int | None
    """When it settled (or its last attempt ended, while retrying)."""
    error_type: str | None
    """Its last failed attempt's error type (never the message: see job pages)."""
    updated_at_ms: int


def key(recorded: RecordedEvent) -> str | None:
    event = recorded.event
    if isinstance(event, JobEnqueued):
        if event.periodic_schedule_id is None and event.run_now_schedule_id is None:
            return None
        return event.job_id
    if isinstance(event, RUN_EVENTS) and event.schedule_id is not None:
        return event.job_id
    return None


def creates(recorded: RecordedEvent) -> dict[str, Any] | None:
    event = recorded.event
    if not isinstance(event, JobEnqueued):
        return None
    schedule_id = event.periodic_schedule_id or event.run_now_schedule_id
    if schedule_id is None:
        return None
    return {
        "job_id": event.job_id,
        "schedule_id": schedule_id,
        "position": recorded.position,
        "tick_ms": event.periodic_tick_ms,
        "manual": event.periodic_schedule_id is None,
        "enqueued_at_ms": recorded.recorded_at_ms,
        "state": RunState.ENQUEUED.value,
        "attempts": 0,
        "started_at_ms": None,
        "finished_at_ms": None,
        "error_type": None,
        "updated_at_ms": recorded.recorded_at_ms,
    }


def changes(recorded: RecordedEvent) -> dict[str, Any] | None:
    """The columns a run-settling event sets, whatever the row held."""
    event = recorded.event
    at = recorded.recorded_at_ms
    delta: dict[str, Any]
    if isinstance(event, JobSucceeded):
        delta = {
            "state": RunState.SUCCEEDED.value,
            "attempts": event.attempt,
            "started_at_ms": event.started_at_ms,
            "finished_at_ms": at,
            "error_type": None,
        }
    elif isinstance(event, JobAttemptFailed):
        settled = event.retry_at_ms is None
        delta = {
            "state": (RunState.FAILED if settled else RunState.RETRYING).value,
            "attempts": event.attempt,
            "started_at_ms": event.started_at_ms,
            "finished_at_ms": at,
            "error_type": event.error_type,
        }
    elif isinstance(event, JobQuarantined):
        delta = {"state": RunState.QUARANTINED.value, "finished_at_ms": at}
    elif isinstance(event, JobCancelled):
        delta = {"state": RunState.CANCELLED.value, "finished_at_ms": at}
    elif isinstance(event, JobExpired):
        delta = {"state": RunState.EXPIRED.value, "finished_at_ms": at}
    elif isinstance(event, JobFinished):
        delta = {"state": _FINISHED_AS[event.state].value, "finished_at_ms": at}
    elif isinstance(event, JobRetried):
        delta = {
            "state": RunState.ENQUEUED.value,
            "attempts": 0,
            "started_at_ms": None,
            "finished_at_ms": None,
            "error_type": None,
        }
    else:
        return None
    delta["updated_at_ms"] = at
    return delta


SCHEDULE_RUNS: Projection[ScheduleRunRow] = Projection(
    name="schedule_runs",
    table="schedule_runs",
    row_type=ScheduleRunRow,
    key_column="job_id",
    key=key,
    apply=fold_of(ScheduleRunRow, creates, changes),
    creates=creates,
    changes=changes,
)
