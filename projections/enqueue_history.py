"""The enqueue history: one row per automatic attempt still in the log.

Rows are keyed by the event's log position, which is monotonic, survives a
rebuild unchanged, and doubles as the paging cursor.

The history shows the newest 100 attempts per schedule. Compaction keeps
those in the log (or more: `attempts_per_schedule`) and removes older
attempts, with their rows, in the same transaction; reads show only the
newest 100 whatever the table holds. Trimming on every
write instead walked a hundred index entries per schedule per batch: on
PostgreSQL, with full histories, a third of each tick's cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from headgate._domain.events import EnqueueAttempted, RecordedEvent
from headgate._projections.base import Projection

KEEP_PER_SCHEDULE: Final = 100


@dataclass(frozen=True)
class EnqueueEventRow:
    """An `EnqueueAttempted` event as the history holds it (public: `EnqueueEvent`)."""

    event_id: int
    schedule_id: str
    tick_ms: int
    job_id: str
    outcome: str
    reason: str
    attempt: int
    recorded_at_ms: int


def key(recorded: RecordedEvent) -> int | None:
    return recorded.position if isinstance(recorded.event, EnqueueAttempted) else None


def creates(recorded: RecordedEvent) -> dict[str, Any] | None:
    event = recorded.event
    if not isinstance(event, EnqueueAttempted):
        return None
    return {
        "event_id": recorded.position,
        "schedule_id": event.schedule_id,
        "tick_ms": event.tick_ms,
        "job_id": event.job_id,
        "outcome": event.outcome.value,
        "reason": event.reason,
        "attempt": event.attempt,
        "recorded_at_ms": recorded.recorded_at_ms,
    }


def apply(row: EnqueueEventRow | None, recorded: RecordedEvent) -> EnqueueEventRow | None:
    created = creates(recorded)
    return row if created is None else EnqueueEventRow(**created)


ENQUEUE_HISTORY: Projection[EnqueueEventRow] = Projection(
    name="enqueue_history",
    table="enqueue_history",
    row_type=EnqueueEventRow,
    key_column="event_id",
    key=key,
    apply=apply,
    creates=creates,
    append_only=True,
)
