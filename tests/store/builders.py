"""Small builders for domain events, so tests read as what happened."""

from __future__ import annotations

from headgate._domain.events import (
    EnqueueAttempted,
    JobClaimed,
    JobEnqueued,
    Outcome,
    ScheduleDefined,
)
from headgate._domain.options import JobOptions, ScheduleDefinition
from headgate._domain.streams import job_stream, schedule_stream
from headgate._json import JsonValue
from headgate._store.port import NO_STREAM, Store, StreamAppend

_STATE = ("last_enqueued_ms", "due_at_ms", "declared", "declared_by")


def defined(
    schedule_id: str = "nightly", next_run_ms: int = 60_000, **overrides: object
) -> ScheduleDefined:
    """A ScheduleDefined; `overrides` are the definition's flat fields (stored
    unchecked, as an earlier build may have) or the event's own state."""
    fields: dict[str, object] = {
        "spec": "@every:60000",
        "kind": "report.build",
        "queue": "default",
        "payload": {"team": 7},
        "on_missed": "skip",
        "backfill_max": 1,
        "paused": False,
    }
    state = {name: overrides.pop(name) for name in _STATE if name in overrides}
    fields.update(overrides)
    return ScheduleDefined(
        schedule_id=schedule_id,
        definition=ScheduleDefinition.restored_fields(fields),
        next_run_ms=next_run_ms,
        **state,  # type: ignore[arg-type]
    )


def schedule_defined(  # noqa: PLR0917 (an event written out, as it was stored)
    schedule_id: str,
    spec: str,
    kind: str,
    queue: str,
    payload: JsonValue,
    on_missed: str,
    backfill_max: int,
    paused: bool,
    next_run_ms: int,
    **more: object,
) -> ScheduleDefined:
    """A ScheduleDefined from its fields written out, as before definitions
    were one value object (stored unchecked, as an earlier build may have)."""
    fields = {
        "spec": spec,
        "kind": kind,
        "queue": queue,
        "payload": payload,
        "on_missed": on_missed,
        "backfill_max": backfill_max,
        "paused": paused,
        **more,
    }
    return defined(schedule_id, next_run_ms, **fields)


def enqueued(  # noqa: PLR0917 (an event written out, as it was stored)
    job_id: str,
    kind: str,
    queue: str,
    payload: JsonValue,
    unique_key: str | None = None,
    periodic_schedule_id: str | None = None,
    periodic_tick_ms: int | None = None,
    run_at_ms: int | None = None,
    max_attempts: int | None = None,
    timeout_ms: int | None = None,
    run_now_schedule_id: str | None = None,
    priority: int | None = None,
) -> JobEnqueued:
    """A JobEnqueued from its fields written out (options stored unchecked, as an
    earlier build may have)."""
    options = JobOptions.restored(
        queue=queue,
        unique_key=unique_key,
        run_at_ms=run_at_ms,
        max_attempts=max_attempts,
        timeout_ms=timeout_ms,
        priority=priority,
    )
    return JobEnqueued(
        job_id,
        kind,
        payload,
        options,
        periodic_schedule_id,
        periodic_tick_ms,
        run_now_schedule_id,
    )


def attempted(
    schedule_id: str,
    tick_ms: int,
    outcome: Outcome = Outcome.ENQUEUED,
    reason: str = "accepted",
    **extra: object,
) -> EnqueueAttempted:
    return EnqueueAttempted(
        schedule_id, tick_ms, f"job-for-{schedule_id}-{tick_ms}", outcome, reason, **extra
    )  # type: ignore[arg-type]


def create_schedule(store: Store, schedule_id: str = "nightly", next_run_ms: int = 60_000) -> None:
    store.log.append(schedule_stream(schedule_id), NO_STREAM, [defined(schedule_id, next_run_ms)])


def fire_tick(store: Store, schedule_id: str, tick_ms: int, interval_ms: int = 60_000) -> None:
    """What the scheduler writes for one successful tick: the job, and the record
    carrying the advance."""
    version = store.log.stream_version(schedule_stream(schedule_id))
    job_id = f"job-for-{schedule_id}-{tick_ms}"
    store.log.append_unit(
        [
            StreamAppend(
                job_stream(job_id),
                NO_STREAM,
                (
                    enqueued(
                        job_id, "report.build", "default", {"team": 7}, None, schedule_id, tick_ms
                    ),
                ),
            ),
            StreamAppend(
                schedule_stream(schedule_id),
                version,
                (
                    attempted(
                        schedule_id,
                        tick_ms,
                        next_run_ms=tick_ms + interval_ms,
                        last_enqueued_ms=tick_ms,
                    ),
                ),
            ),
        ]
    )


def enqueue(
    store: Store,
    job_id: str,
    *,
    kind: str = "k",
    queue: str = "q",
    run_at_ms: int | None = None,
    payload: object = None,
    priority: int | None = None,
) -> None:
    """A job, as an enqueue appends it (its payload names it unless given)."""
    body = {"n": job_id} if payload is None else payload
    job = enqueued(job_id, kind, queue, body, run_at_ms=run_at_ms, priority=priority)
    store.log.append(job_stream(job_id), NO_STREAM, [job])


def claim(store: Store, job_id: str, worker: str = "w1", attempt: int = 1) -> None:
    """A worker's claim of the job, at its stream's current version."""
    stream = job_stream(job_id)
    version = store.log.stream_version(stream)
    store.log.append(stream, version, [JobClaimed(job_id, worker, attempt, 10**13)])
