"""What a worker appends for the jobs it runs: pure functions of job rows.

A claim is the job row's own state (`JobQueue.claim`), not an event; the
attempt's end is one event on the job's stream at the version the row had
when it was claimed (the compare-and-set). Every way a running job leaves
its worker is an event, so a worker that lost its job (rescued while it was
frozen, released, cancelled by an operator) finds the stream moved on, and
its append is refused with nothing recorded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from headgate._domain.events import (
    DomainEvent,
    FingerprintBlameCleared,
    JobAttemptFailed,
    JobExpired,
    JobReleased,
    JobSnoozed,
    JobState,
    JobSucceeded,
)
from headgate._domain.job_rules import ErrorRecord, next_run_after_failure
from headgate._domain.retry import DEFAULT_RETRY, Retry
from headgate._domain.streams import job_stream, quarantine_stream
from headgate._json import JsonValue
from headgate._model import PeriodicOrigin
from headgate._projections import JobRow
from headgate._projections.jobs import run_schedule_id
from headgate._runtime.handlers import HandlerSpec
from headgate._store.port import ANY_VERSION, StreamAppend


@dataclass(frozen=True)
class Claim:
    """A job a worker took: what it needs to run the attempt and record its end."""

    job_id: str
    kind: str
    queue: str
    payload: JsonValue
    attempt: int
    max_attempts: int
    crash_count: int
    snoozes: int
    periodic_origin: PeriodicOrigin | None
    timeout_ms: int
    """The attempt's timeout, as configured (the job's, or its handler's)."""
    deadline_ms: int
    run_at_ms: int
    """When the job became due: its pickup latency is measured from here."""
    claimed_version: int
    """The job stream's version when it was claimed: the end appends at it."""
    blamed_fingerprint: str | None = None
    """The job's fingerprint when, at the claim, it carried blame for crashes:
    a completion clears it."""
    trace_context: str | None = None
    """The trace its enqueue or tick was part of (`_tracing`)."""
    schedule_id: str | None = None
    """The schedule whose run it is (a tick's or an Enqueue now's job), else None."""
    partition_key: str | None = None
    """The job's partition key: what a concurrency limit's scope may name."""

    @property
    def first_run(self) -> bool:
        """Its first run: no attempt ended, no crash, no snooze before it."""
        return self.attempt == 1 and self.crash_count == 0 and self.snoozes == 0


def expired(row: JobRow) -> StreamAppend:
    """A claimed job past its start deadline, recorded expired instead of run."""
    assert row.start_by_ms is not None
    return StreamAppend(
        job_stream(row.job_id),
        row.version,
        (JobExpired(row.job_id, row.start_by_ms, run_schedule_id(row)),),
    )


def claimed(row: JobRow, spec: HandlerSpec, *, blamed: str | None = None) -> Claim:
    """What a worker needs of a job it claimed (`JobQueue.claim` made its row
    running), with the job's own options over the handler's; `blamed` is its
    fingerprint if that carries crash blame."""
    timeout_ms = row.timeout_ms if row.timeout_ms is not None else spec.timeout_ms
    origin = None
    if row.periodic_schedule_id is not None and row.periodic_tick_ms is not None:
        origin = PeriodicOrigin(row.periodic_schedule_id, row.periodic_tick_ms)
    assert row.deadline_ms is not None, "a claimed row has its deadline"
    return Claim(
        job_id=row.job_id,
        kind=row.kind,
        queue=row.queue,
        payload=json.loads(row.payload),
        attempt=row.attempts + 1,
        max_attempts=row.max_attempts if row.max_attempts is not None else spec.max_attempts,
        crash_count=row.crash_count,
        snoozes=row.snoozes,
        periodic_origin=origin,
        timeout_ms=timeout_ms,
        deadline_ms=row.deadline_ms,
        run_at_ms=row.run_at_ms,
        claimed_version=row.version,
        blamed_fingerprint=blamed,
        trace_context=row.trace_context,
        schedule_id=run_schedule_id(row),
        partition_key=row.partition_key,
    )


def lost(claimed: Claim, row: JobRow, worker_id: str) -> bool:
    """Whether the job `row` shows has left this worker's claim: an event moved it
    on (a rescue, a release, a cancel), or another worker runs it. A row behind
    the claim, or pending at its version, is a projection being rebuilt (the
    rebuild puts the claim back), not a lost job."""
    if row.version != claimed.claimed_version:
        return row.version > claimed.claimed_version
    return row.state == JobState.RUNNING.value and row.worker_id != worker_id


def capacity_left(capacity: Mapping[str, int], busy: Mapping[str, int]) -> dict[str, int]:
    """Free slots per queue."""
    return {queue: size - busy.get(queue, 0) for queue, size in capacity.items()}


def succeeded(
    claimed: Claim, worker_id: str, started_at_ms: int, result: JsonValue
) -> StreamAppend:
    event = JobSucceeded(
        claimed.job_id,
        claimed.attempt,
        worker_id,
        started_at_ms,
        result,
        claimed.max_attempts,
        claimed.timeout_ms,
        claimed.schedule_id,
    )
    return _on_stream(claimed, event)


def snoozed(claimed: Claim, worker_id: str, started_at_ms: int, run_at_ms: int) -> StreamAppend:
    """The handler snoozed the job: due again at `run_at_ms`, the attempt not counted."""
    event = JobSnoozed(
        claimed.job_id,
        claimed.attempt,
        worker_id,
        started_at_ms,
        run_at_ms,
        claimed.snoozes + 1,
        claimed.max_attempts,
        claimed.timeout_ms,
    )
    return _on_stream(claimed, event)


def ends_job(end: StreamAppend) -> bool:
    """The attempt's end ends its job for good (completed, or failed with no retry
    left): those waiting for its result are told (`JOBS_ENDED`)."""
    event = end.events[0]
    return isinstance(event, JobSucceeded) or (
        isinstance(event, JobAttemptFailed) and event.retry_at_ms is None
    )


def end_unit(claimed: Claim, end: StreamAppend) -> list[StreamAppend]:
    """What one attempt's end writes: the job's event, and for a completion of a
    blamed fingerprint the clearing of its blame, both or neither."""
    unit = [end]
    fingerprint = claimed.blamed_fingerprint
    if fingerprint is not None and isinstance(end.events[0], JobSucceeded):
        cleared = FingerprintBlameCleared(fingerprint, claimed.job_id)
        unit.append(StreamAppend(quarantine_stream(fingerprint), ANY_VERSION, (cleared,)))
    return unit


def failed(
    claimed: Claim,
    worker_id: str,
    started_at_ms: int,
    error: ErrorRecord,
    now_ms: int,
    *,
    timed_out: bool = False,
    retry: Retry = DEFAULT_RETRY,
    gives_up: bool = False,
) -> StreamAppend:
    """The attempt failed: retried after `retry`'s wait, or (its last attempt, or
    `gives_up`: an error its handler's policy does not retry) the job has failed."""
    retry_at = (
        None
        if gives_up
        else next_run_after_failure(
            claimed.job_id, claimed.attempt, claimed.max_attempts, now_ms, retry
        )
    )
    event = JobAttemptFailed(
        claimed.job_id,
        claimed.attempt,
        worker_id,
        started_at_ms,
        error.error_type,
        error.message,
        retry_at,
        timed_out,
        claimed.max_attempts,
        claimed.timeout_ms,
        error.traceback,
        claimed.schedule_id,
    )
    return _on_stream(claimed, event)


def attempt_outcome(end: StreamAppend) -> str:
    """How an attempt ended, in the attempt history's words (`job_attempts`):
    succeeded, failed, timed_out, snoozed or released."""
    event = end.events[0]
    if isinstance(event, JobSnoozed):
        return "snoozed"
    if isinstance(event, JobAttemptFailed):
        return "timed_out" if event.timed_out else "failed"
    if isinstance(event, JobReleased):
        return "released"
    return "succeeded"


def released(claimed: Claim, worker_id: str) -> StreamAppend:
    return _on_stream(claimed, JobReleased(claimed.job_id, worker_id))


def origin_fields(claimed: Claim) -> dict[str, object]:
    """The schedule and tick a job came from, as log fields (none for a job enqueued
    by hand)."""
    origin = claimed.periodic_origin
    return {} if origin is None else {"schedule_id": origin.schedule_id, "tick_ms": origin.tick_ms}


def row_origin_fields(row: JobRow) -> dict[str, object]:
    """`origin_fields` of a job read as its row (not claimed)."""
    if row.periodic_schedule_id is None:
        return {}
    return {"schedule_id": row.periodic_schedule_id, "tick_ms": row.periodic_tick_ms}


def _on_stream(claimed: Claim, event: DomainEvent) -> StreamAppend:
    return StreamAppend(job_stream(claimed.job_id), claimed.claimed_version, (event,))
