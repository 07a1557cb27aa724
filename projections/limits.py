"""Fleet-wide limits: the concurrency limits and the rate limits a claim keeps
(`limits.Slots`), one row per scope and per rate class."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from headgate._domain.events import (
    ConcurrencyLimitCleared,
    ConcurrencyLimitSet,
    RateLimitCleared,
    RateLimitSet,
    RecordedEvent,
)
from headgate._domain.limits import ConcurrencyLimit, RateLimit, scope_of
from headgate._projections.base import Projection


@dataclass(frozen=True)
class ConcurrencyLimitRow:
    scope: str
    queue: str | None
    kind: str | None
    partition_key: str | None
    max_running: int
    set_at_ms: int

    def limit(self) -> ConcurrencyLimit:
        return ConcurrencyLimit(self.queue, self.kind, self.partition_key, self.max_running)


@dataclass(frozen=True)
class RateLimitRow:
    rate_class: str
    max_starts: int
    per_ms: int
    set_at_ms: int

    def limit(self) -> RateLimit:
        return RateLimit(self.rate_class, self.max_starts, self.per_ms)


_LIMIT_EVENTS: Final = (ConcurrencyLimitSet, ConcurrencyLimitCleared)
_RATE_EVENTS: Final = (RateLimitSet, RateLimitCleared)


def limit_key(recorded: RecordedEvent) -> str | None:
    event = recorded.event
    if isinstance(event, _LIMIT_EVENTS):
        return scope_of(event.queue, event.kind, event.partition_key)
    return None


def apply_limit(
    row: ConcurrencyLimitRow | None, recorded: RecordedEvent
) -> ConcurrencyLimitRow | None:
    event = recorded.event
    if isinstance(event, ConcurrencyLimitSet):
        return ConcurrencyLimitRow(
            scope_of(event.queue, event.kind, event.partition_key),
            event.queue,
            event.kind,
            event.partition_key,
            event.limit,
            recorded.recorded_at_ms,
        )
    if isinstance(event, ConcurrencyLimitCleared):
        return None
    return row


def rate_key(recorded: RecordedEvent) -> str | None:
    event = recorded.event
    if isinstance(event, _RATE_EVENTS):
        return event.rate_class
    return None


def apply_rate(row: RateLimitRow | None, recorded: RecordedEvent) -> RateLimitRow | None:
    event = recorded.event
    if isinstance(event, RateLimitSet):
        return RateLimitRow(event.rate_class, event.limit, event.per_ms, recorded.recorded_at_ms)
    if isinstance(event, RateLimitCleared):
        return None
    return row


CONCURRENCY_LIMITS: Projection[ConcurrencyLimitRow] = Projection(
    name="concurrency_limits",
    table="concurrency_limits",
    row_type=ConcurrencyLimitRow,
    key_column="scope",
    key=limit_key,
    apply=apply_limit,
)
RATE_LIMITS: Projection[RateLimitRow] = Projection(
    name="rate_limits",
    table="rate_limits",
    row_type=RateLimitRow,
    key_column="rate_class",
    key=rate_key,
    apply=apply_rate,
)
