"""Small builders for domain events, so tests read as what happened."""

from __future__ import annotations

from headgate._domain.events import (
    EnqueueAttempted,
    JobClaimed,
    JobEnqueued,
    Outcome,
    ScheduleDefined,
)
from headgate._domain.streams import job_stream, schedule_stream
from headgate._store.port import NO_STREAM, Store, StreamAppend


def defined(
    schedule_id: str = "nightly", next_run_ms: int = 60_000, **overrides: object
) -> ScheduleDefined:
    fields: dict[str, object] = {
        "schedule_id": schedule_id,
        "spec": "@every:60000",
        "kind": "report.build",
        "queue": "default",
        "payload": {"team": 7},
        "on_missed": "skip",
        "backfill_limit": 1,
        "paused": False,
        "next_run_ms": next_run_ms,
    }
    fields.update(overrides)
    return ScheduleDefined(**fields)  # type: ignore[arg-type]


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
                    JobEnqueued(
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
) -> None:
    """A job, as an enqueue appends it (its payload names it unless given)."""
    body = {"n": job_id} if payload is None else payload
    job = JobEnqueued(job_id, kind, queue, body, run_at_ms=run_at_ms)  # type: ignore[arg-type]
    store.log.append(job_stream(job_id), NO_STREAM, [job])


def claim(store: Store, job_id: str, worker: str = "w1", attempt: int = 1) -> None:
    """A worker's claim of the job, at its stream's current version."""
    stream = job_stream(job_id)
    version = store.log.stream_version(stream)
    store.log.append(stream, version, [JobClaimed(job_id, worker, attempt, 10**13)])
