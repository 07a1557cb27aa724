"""The memory store's event log: events as the mapper encodes them, in log order
and by stream, and a transaction's appends and deletions over them.

Events are kept encoded (type name, schema version, canonical JSON body) and
decoded on every read, as a database keeps them: what a memory store accepts
is exactly what the SQL store accepts, and no caller can change a stored
event by changing an object it appended or read.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from headgate._domain.events import DomainEvent, RecordedEvent
from headgate._store.mapper import decode, encode


@dataclass(frozen=True)
class StoredEvent:
    position: int
    stream_id: str
    version: int
    type: str
    schema_version: int
    body: str
    recorded_at_ms: int

    @classmethod
    def of(cls, recorded: RecordedEvent) -> StoredEvent:
        type_name, schema_version, body = encode(recorded.event)
        return cls(
            recorded.position,
            recorded.stream_id,
            recorded.version,
            type_name,
            schema_version,
            body,
            recorded.recorded_at_ms,
        )

    def event(self) -> DomainEvent:
        return decode(self.type, self.schema_version, self.body)

    def recorded(self) -> RecordedEvent:
        return RecordedEvent(
            self.position, self.stream_id, self.version, self.recorded_at_ms, self.event()
        )


class CommittedLog:
    """Every committed event, by position and by stream."""

    def __init__(self) -> None:
        self.head = 0
        self._events: list[StoredEvent] = []
        self._positions: list[int] = []
        self._streams: dict[str, list[StoredEvent]] = {}

    def between(self, after: int, until: int | None, limit: int) -> list[StoredEvent]:
        """Events with after < position <= until, in log order, at most `limit`."""
        start = bisect.bisect_right(self._positions, after)
        found = self._events[start : start + max(limit, 0)]
        return found if until is None else [e for e in found if e.position <= until]

    def stream(self, stream_id: str) -> list[StoredEvent]:
        return list(self._streams.get(stream_id, ()))

    def version(self, stream_id: str) -> int:
        events = self._streams.get(stream_id)
        return events[-1].version if events else 0

    def stream_ids(self) -> list[str]:
        return list(self._streams)

    def apply(
        self, appended: Sequence[StoredEvent], removed: Collection[StoredEvent], head: int
    ) -> None:
        """Commit a transaction's deletions and appends (which follow every
        committed event in log order)."""
        if removed:
            gone = {stored.position for stored in removed}
            self._events = [e for e in self._events if e.position not in gone]
            self._positions = [e.position for e in self._events]
            for stream_id in {stored.stream_id for stored in removed}:
                kept = [e for e in self._streams[stream_id] if e.position not in gone]
                if kept:
                    self._streams[stream_id] = kept
                else:
                    del self._streams[stream_id]
        for stored in appended:
            self._events.append(stored)
            self._positions.append(stored.position)
            self._streams.setdefault(stored.stream_id, []).append(stored)
        self.head = head


class LogChanges:
    """One transaction's appends and deletions: reads see them over the committed
    log; `commit` applies them."""

    def __init__(self, log: CommittedLog) -> None:
        self._log = log
        self.head = log.head
        self._appended: list[StoredEvent] = []
        self._appended_to: dict[str, list[StoredEvent]] = {}
        self._removed: dict[int, StoredEvent] = {}

    def stream(self, stream_id: str) -> list[StoredEvent]:
        """The stream as it would be if this transaction committed now."""
        committed = [e for e in self._log.stream(stream_id) if e.position not in self._removed]
        return committed + self._appended_to.get(stream_id, [])

    def version(self, stream_id: str) -> int:
        appended = self._appended_to.get(stream_id)
        if appended:
            return appended[-1].version
        if not self._removed:
            return self._log.version(stream_id)
        events = self.stream(stream_id)
        return events[-1].version if events else 0

    def stream_ids(self) -> list[str]:
        """Every stream with an event, committed or appended here."""
        return list(dict.fromkeys([*self._log.stream_ids(), *self._appended_to]))

    def append(self, stored: StoredEvent) -> None:
        self.head = stored.position
        self._appended.append(stored)
        self._appended_to.setdefault(stored.stream_id, []).append(stored)

    def remove(self, events: Iterable[StoredEvent]) -> int:
        """Delete these (committed) events; returns how many."""
        count = 0
        for stored in events:
            if stored.position not in self._removed:
                self._removed[stored.position] = stored
                count += 1
        return count

    def commit(self) -> None:
        self._log.apply(self._appended, list(self._removed.values()), self.head)
