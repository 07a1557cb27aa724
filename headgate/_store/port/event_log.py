"""The event log: streams of events, appended in units at expected versions.

The record of truth. Everything else a store keeps (projections, leases,
heartbeats) is either folded from it or operational state beside it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager

from headgate._domain.events import DomainEvent, RecordedEvent
from headgate._errors import ConcurrencyConflict
from headgate._store.port.leases import Fence
from headgate._store.port.log_transaction import (
    ANY_VERSION,
    MAX_STREAM_ID_LENGTH,
    NO_STREAM,
    LogTransaction,
    StreamAppend,
    Unit,
    UnitResult,
)
from headgate._store.port.write_transaction import WriteTransaction

__all__ = [
    "ANY_VERSION",
    "MAX_STREAM_ID_LENGTH",
    "NO_STREAM",
    "EventLog",
    "LogTransaction",
    "StreamAppend",
    "Unit",
    "UnitResult",
]


class EventLog(ABC):
    """The record of truth: streams of events, appended with optimistic concurrency.

    An implementation must assign positions gap-free in commit order, keep
    each stream's versions consecutive from 1, and refuse a unit whose
    expected versions do not hold (`ConcurrencyConflict`), writing none of it.
    """

    @abstractmethod
    def write(
        self,
        fence: Fence | None = None,
        *,
        record_at_ms: int | None = None,
        while_rebuilding: bool = False,
    ) -> AbstractContextManager[WriteTransaction]:
        """A serialised write transaction; commits when the block exits cleanly.

        With `fence`, raises LeaseLost unless the lease is held at that term
        and unexpired, checked inside the transaction, so a holder paused past
        its expiry writes nothing. Raises ProjectionsRebuilding while a
        projection lags the log (decisions read projections); only maintenance
        passes `while_rebuilding`. With `record_at_ms`, events are recorded at
        that instant (or now, if later): for a commit the caller holds until
        the clock reaches it, which the store then keeps as short as it can
        (on SQLite, no checkpoint inside it: call `checkpoint` afterwards).
        Raises StoreClosed after `Store.close`.
        """

    @abstractmethod
    def write_within(self, host: object) -> AbstractContextManager[WriteTransaction]:
        """A write transaction inside the host's own open transaction: `host` a
        SQLAlchemy Connection or Session on this store's database (sync; an
        async host's runs through `run_sync`). Its events and projection rows
        commit or roll back with the host's transaction, never before; listening
        workers hear of them at the host's commit. The log head stays locked
        until then, so every other writer of the store waits for the host.
        ValidationError ("connection") for anything else, another database, or
        a connection not in a transaction; a store with no database to share
        (memory) refuses every host the same way."""

    @abstractmethod
    def checkpoint(self) -> None:
        """Fold the write-ahead log into the database without blocking anyone, where
        the backend has one to fold (SQLite); otherwise nothing."""

    @abstractmethod
    def read_stream(self, stream_id: str) -> list[RecordedEvent]:
        """The stream's events, oldest first."""

    @abstractmethod
    def read_stream_back(
        self,
        stream_id: str,
        *,
        until_ms: int | None = None,
        before_version: int | None = None,
        types: Collection[type[DomainEvent]] | None = None,
        limit: int = 100,
    ) -> list[RecordedEvent]:
        """The stream's newest `limit` events recorded at or before `until_ms`
        (None: any time), with a version below `before_version` (None: any) and
        of one of `types` (None: any), newest first.

        What a fold "as of" an instant reads: bounded however long the stream,
        and paged backwards by passing the oldest version read as
        `before_version`. Only what compaction kept is there (`oldest_kept`).
        """

    @abstractmethod
    def oldest_kept(self, stream_id: str) -> RecordedEvent | None:
        """The stream's oldest event still kept (None: no event is).

        Compaction trims a schedule's stream from the front, so a version above
        1 here says older events existed and are gone: a fold cannot tell what
        the stream held before this event was recorded.
        """

    @abstractmethod
    def read_all(
        self, after_position: int = 0, limit: int = 1000, until_position: int | None = None
    ) -> list[RecordedEvent]:
        """Events with position > after_position (and <= until_position), in log order.

        Positions are gap-free in commit order, so a reader tailing by position
        never skips an event that commits later with a lower position.
        """

    @abstractmethod
    def head(self) -> int:
        """The last assigned position (0 for an empty log)."""

    @abstractmethod
    def stream_version(self, stream_id: str) -> int:
        """The stream's latest version; 0 if it has no events."""

    def append(
        self,
        stream_id: str,
        expected_version: int,
        new_events: Sequence[DomainEvent],
        *,
        fence: Fence | None = None,
    ) -> list[RecordedEvent]:
        """Append to one stream; raises ConcurrencyConflict if it is not at `expected_version`."""
        return self.append_unit(
            [StreamAppend(stream_id, expected_version, tuple(new_events))], fence=fence
        )

    def append_unit(self, unit: Unit, *, fence: Fence | None = None) -> list[RecordedEvent]:
        """Append to several streams atomically; raises ConcurrencyConflict on any stale one."""
        (result,) = self.append_units([unit], fence=fence)
        if isinstance(result, ConcurrencyConflict):
            raise result
        return result

    def append_units(
        self, units: Sequence[Unit], *, fence: Fence | None = None
    ) -> list[UnitResult]:
        """Group commit: many independent units in one transaction."""
        with self.write(fence) as transaction:
            return transaction.append_units(units)
