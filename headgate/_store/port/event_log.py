"""The event log: streams of events, appended in units at expected versions.

The record of truth. Everything else a store keeps (projections, leases,
heartbeats) is either folded from it or operational state beside it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from headgate._domain.events import DomainEvent, RecordedEvent
from headgate._errors import ConcurrencyConflict
from headgate._store.port.leases import Fence

if TYPE_CHECKING:
    from headgate._store.port.store import WriteTransaction

NO_STREAM: Final = 0
"""Expected version of a stream that must not exist yet."""
ANY_VERSION: Final = -1
"""Expected version that accepts any current version."""
MAX_STREAM_ID_LENGTH: Final = 255


@dataclass(frozen=True)
class StreamAppend:
    """Events for one stream, valid only if the stream is at `expected_version`."""

    stream_id: str
    expected_version: int
    events: tuple[DomainEvent, ...]

    def __post_init__(self) -> None:
        if not 0 < len(self.stream_id) <= MAX_STREAM_ID_LENGTH:
            raise ValueError(f"stream id must be 1-{MAX_STREAM_ID_LENGTH} characters")
        if not self.events:
            raise ValueError(f"an append to {self.stream_id!r} needs at least one event")


Unit = Sequence[StreamAppend]
"""Stream appends that land together or not at all."""
UnitResult = list[RecordedEvent] | ConcurrencyConflict


class LogTransaction(ABC):
    """The event log's part of a write transaction: stream versions and appends.

    An implementation must guarantee that no other writer (in this process or
    any other) commits between the transaction's reads and its commit; that
    appends are visible to the transaction's own reads at once; and that
    everything commits when the `EventLog.write` block exits cleanly and
    nothing does if it raises.
    """

    @property
    @abstractmethod
    def now_ms(self) -> int:
        """The instant events appended here are recorded at (store time)."""

    @property
    @abstractmethod
    def head(self) -> int:
        """The last log position assigned, this transaction's appends included."""

    @abstractmethod
    def stream_versions(self, stream_ids: Iterable[str]) -> dict[str, int]:
        """Current version of each stream; 0 for a stream that does not exist."""

    @abstractmethod
    def new_streams(self, stream_ids: Iterable[str]) -> None:
        """These streams do not exist: their ids were made unique just now (a new
        job's). Their version is then 0, and their first event none, without
        reading the log. Should one exist after all, appending its version 1
        fails the whole write (`ConcurrencyConflict`): the log's own rule."""

    @abstractmethod
    def first_events(self, stream_ids: Iterable[str]) -> dict[str, DomainEvent]:
        """The first event of each of these streams that exists.

        Only for streams compaction never trims from the front (jobs, manual
        runs): there a missing first event means a missing stream.
        """

    @abstractmethod
    def append_units(self, units: Sequence[Unit]) -> list[UnitResult]:
        """Append each unit whose expected versions all hold, in order, with gap-free
        log positions and the projections updated in this transaction.

        A unit with a stale expected version gets a `ConcurrencyConflict` in its
        result slot and writes nothing; its neighbours are appended regardless.
        Events are encoded by `headgate._store.mapper` as they are appended, so
        an event the mapper refuses (a payload that is not plain JSON) raises
        and, like any error inside the block, commits nothing. A job whose
        periodic origin (schedule, tick) another job holds, or whose unique key
        a pending or running job holds, fails the write with
        ConstraintViolation (the admission gate keeps both from happening).
        """


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
