"""The public read types of jobs: a job, its attempts, the limits it runs under."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from headgate._domain.events import JobState
from headgate._domain.ids import fingerprint_of_text
from headgate._domain.lifecycle import AttemptOutcome
from headgate._json import JsonValue
from headgate._model.rows import same_named
from headgate._projections import (
    JobAttemptRow,
    JobRow,
)


class PeriodicOrigin(NamedTuple):
    schedule_id: str
    tick_ms: int


@dataclass(frozen=True)
class JobAttempt:
    """How one attempt at a job ended (newest first in `Job.attempt_history`), or
    an operator's retry, after which the numbers start again from 1."""

    attempt: int
    """Its number; for a crash, the attempt it ended (0 if the crash was recorded
    by a build that did not say); 0 for a release and a retry."""
    outcome: str
    """How it ended, as the text of an `AttemptOutcome` (succeeded, failed, timed_out,
    snoozed, released, crashed, quarantined or retried), which compares equal to it."""
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
        if self.started_at_ms is None or self.outcome in {
            AttemptOutcome.CRASHED,
            AttemptOutcome.QUARANTINED,
        }:
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
    """A job as read back. Each field is described once, for every surface: a
    job option in `JobOptions`, the rest in `_domain/read_fields.JOB_READ`
    (`read_field(JOB_READ, name)`); `tests/test_option_parity.py` holds this class to
    them."""

    id: str
    kind: str
    queue: str
    payload: JsonValue
    state: str
    unique_key: str | None
    created_at_ms: int
    periodic_origin: PeriodicOrigin | None
    attempts: int = 0
    crash_count: int = 0
    run_at_ms: int = 0
    max_attempts: int | None = None
    timeout_ms: int | None = None
    worker_id: str | None = None
    result: JsonValue = None
    error_type: str | None = None
    error_message: str | None = None
    updated_at_ms: int = 0
    attempt_history: tuple[JobAttempt, ...] = ()
    run_now_schedule_id: str | None = None
    fingerprint: str = ""
    running_attempt: RunningAttempt | None = None
    priority: int = 0
    start_within_ms: int | None = None
    snoozes: int = 0
    start_by_ms: int | None = None
    partition_key: str | None = None
    rate_class: str | None = None
    waiting_for: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    @classmethod
    def from_row(cls, row: JobRow, attempts: Sequence[JobAttemptRow] = ()) -> Job:
        """The row's fields of the same name as they are, then those a read makes:
        JSON parsed, the origin, the fingerprint, the attempts, and a completed
        job's error cleared (each failed attempt keeps its own)."""
        origin = None
        if row.periodic_schedule_id is not None and row.periodic_tick_ms is not None:
            origin = PeriodicOrigin(row.periodic_schedule_id, row.periodic_tick_ms)
        completed = row.state == JobState.COMPLETED
        made = {
            "id": row.job_id,
            "payload": json.loads(row.payload),
            "periodic_origin": origin,
            "result": None if row.result is None else json.loads(row.result),
            "error_type": None if completed else row.error_type,
            "error_message": None if completed else row.error_message,
            "attempt_history": tuple(JobAttempt.from_row(attempt) for attempt in attempts),
            "fingerprint": fingerprint_of_text(row.kind, row.payload),
            "running_attempt": RunningAttempt.of(row),
            "tags": () if row.tags is None else tuple(json.loads(row.tags)),
        }
        return cls(**{**same_named(row, cls), **made})


class SettingSource(StrEnum):
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
class SettingInForce:
    value: int
    source: SettingSource

    @classmethod
    def of(cls, own: int | None, handler: int | None, default: int) -> SettingInForce:
        """The job's own value over its handler's over the default, as a worker
        takes them when it claims the job."""
        if own is not None:
            return cls(own, SettingSource.JOB)
        if handler is not None:
            return cls(handler, SettingSource.HANDLER)
        return cls(default, SettingSource.DEFAULT)


@dataclass(frozen=True)
class JobSettings:
    """The attempt limit and timeout a job runs under (`operator_of(hg).job_limits`)."""

    max_attempts: SettingInForce
    timeout_ms: SettingInForce


@dataclass(frozen=True)
class JobsPage:
    jobs: list[Job]
    next_cursor: str | None


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
