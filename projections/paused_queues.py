"""Paused queues: a claim takes no job from a queue with a row here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from headgate._domain.events import QueuePaused, QueueResumed, RecordedEvent
from headgate._projections.base import Projection


@dataclass(frozen=True)
class PausedQueueRow:
    queue: str
    note: str
    paused_at_ms: int


_KEYED: Final = (QueuePaused, QueueResumed)


def key(recorded: RecordedEvent) -> str | None:
    event = recorded.event
    if isinstance(event, _KEYED):
        return event.queue
    return None


def apply(row: PausedQueueRow | None, recorded: RecordedEvent) -> PausedQueueRow | None:
    event = recorded.event
    if isinstance(event, QueuePaused):
        return PausedQueueRow(event.queue, event.note, recorded.recorded_at_ms)
    if isinstance(event, QueueResumed):
        return None
    return row


PAUSED_QUEUES: Projection[PausedQueueRow] = Projection(
    name="paused_queues",
    table="paused_queues",
    row_type=PausedQueueRow,
    key_column="queue",
    key=key,
    apply=apply,
)
