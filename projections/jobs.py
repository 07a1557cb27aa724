"""The jobs read model: one row per job, with its periodic origin."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Final

from headgate._domain.events import JobEnqueued, JobFinished, JobState, RecordedEvent
from headgate._json import canonical_json_of_plain
from headgate._projections.base import Projection


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


_KEYED: Final = (JobEnqueued, JobFinished)


def key(recorded: RecordedEvent) -> str | None:
    event = recorded.event
    if isinstance(event, _KEYED):
        return event.job_id
    return None


def creates(recorded: RecordedEvent) -> dict[str, Any] | None:
    """A job's stream starts with JobEnqueued, so that event always makes a new row."""
    event = recorded.event
    if not isinstance(event, JobEnqueued):
        return None
    return {
        "job_id": event.job_id,
        "kind": event.kind,
        "queue": event.queue,
        "payload": canonical_json_of_plain(event.payload),
        "state": JobState.PENDING.value,
        "unique_key": event.unique_key,
        "created_at_ms": recorded.recorded_at_ms,
        "updated_at_ms": recorded.recorded_at_ms,
        "periodic_schedule_id": event.periodic_schedule_id,
        "periodic_tick_ms": event.periodic_tick_ms,
    }


def apply(row: JobRow | None, recorded: RecordedEvent) -> JobRow | None:
    event = recorded.event
    created = creates(recorded)
    if created is not None:
        return JobRow(**created)
    if isinstance(event, JobFinished) and row is not None:
        return replace(row, state=event.state.value, updated_at_ms=recorded.recorded_at_ms)
    return row


JOBS: Projection[JobRow] = Projection(
    name="jobs",
    table="jobs",
    row_type=JobRow,
    key_column="job_id",
    key=key,
    apply=apply,
    creates=creates,
)
