"""The memory store's event log: serialised write transactions and reads of the
committed log."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager

from headgate._clock import Clock, StoreClock
from headgate._domain.events import DomainEvent, RecordedEvent
from headgate._errors import LeaseLost, StoreClosed, ValidationError
from headgate._store.mapper import type_name
from headgate._store.memory.state import MemoryState
from headgate._store.memory.transaction import MemoryWriteTransaction
from headgate._store.port import EventLog, Fence


class MemoryEventLog(EventLog):
    """Writes queue on the state's write lock; each commits whole, at the end of
    its block, or not at all. Projections never lag the log here, so
    ProjectionsRebuilding is never raised."""

    def __init__(self, state: MemoryState, clock: Clock, is_closed: Callable[[], bool]) -> None:
        self._state = state
        self._clock = clock
        self._is_closed = is_closed

    def write_within(self, host: object) -> AbstractContextManager[MemoryWriteTransaction]:
        raise ValidationError(
            "connection",
            "a store in memory has no database to share: transactional enqueue needs "
            "a SQLite or PostgreSQL store",
        )

    @contextlib.contextmanager
    def write(
        self,
        fence: Fence | None = None,
        *,
        record_at_ms: int | None = None,
        while_rebuilding: bool = False,
    ) -> Iterator[MemoryWriteTransaction]:
        with self._state.writing():
            if self._is_closed():
                raise StoreClosed(
                    "writing to the store: the store is closed (Headgate.close() was called)"
                )
            if isinstance(self._clock, StoreClock) and self._clock.reading_due:
                self._clock.measure()
            now = self._clock.now_ms()
            if record_at_ms is not None:
                now = max(now, record_at_ms)
            if fence is not None:
                self._check_fence(fence, now)
            transaction = MemoryWriteTransaction(self._state, now)
            yield transaction
            transaction.commit()
        self._state.notifications.publish(transaction.enqueued_on)

    def _check_fence(self, fence: Fence, now_ms: int) -> None:
        lease = self._state.leases.get(fence.lease)
        if lease is None or lease.term != fence.term or lease.expires_at_ms <= now_ms:
            raise LeaseLost(
                f"lease {fence.lease!r} is no longer held at term {fence.term}; write refused"
            )

    def checkpoint(self) -> None:
        pass  # nothing to fold: there is no write-ahead log

    def read_stream(self, stream_id: str) -> list[RecordedEvent]:
        with self._state.reading():
            stored = self._state.log.stream(stream_id)
        return [event.recorded() for event in stored]

    def read_stream_back(
        self,
        stream_id: str,
        *,
        until_ms: int | None = None,
        before_version: int | None = None,
        types: Collection[type[DomainEvent]] | None = None,
        limit: int = 100,
    ) -> list[RecordedEvent]:
        names = None if types is None else {type_name(t) for t in types}
        with self._state.reading():
            stored = self._state.log.stream(stream_id)
        found: list[RecordedEvent] = []
        for event in reversed(stored):
            if len(found) >= limit:
                break
            if until_ms is not None and event.recorded_at_ms > until_ms:
                continue
            if before_version is not None and event.version >= before_version:
                continue
            if names is None or event.type in names:
                found.append(event.recorded())
        return found

    def oldest_kept(self, stream_id: str) -> RecordedEvent | None:
        with self._state.reading():
            stored = self._state.log.stream(stream_id)
        return stored[0].recorded() if stored else None

    def read_all(
        self, after_position: int = 0, limit: int = 1000, until_position: int | None = None
    ) -> list[RecordedEvent]:
        with self._state.reading():
            stored = self._state.log.between(after_position, until_position, limit)
        return [event.recorded() for event in stored]

    def head(self) -> int:
        with self._state.reading():
            return self._state.log.head

    def stream_version(self, stream_id: str) -> int:
        with self._state.reading():
            return self._state.log.version(stream_id)
