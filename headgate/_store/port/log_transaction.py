"""The event log's part of a write transaction: stream versions and units of
appends at expected versions (`EventLog` opens the transaction)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from headgate._domain.events import DomainEvent, RecordedEvent
from headgate._errors import ConcurrencyConflict

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
