"""How the SQL log gives events their positions, and what a writer locks.

Two ways, one per backend (docs/explanation/log-positions.md holds the
argument for each):

* `HeadOrder` (SQLite): the log head is one row every write transaction
  locks from its first statement (SQLite's write lock does the same), so
  positions are handed out gap-free in commit order and nothing a write reads
  can change before it commits.
* `SequenceOrder` (PostgreSQL): no row every writer takes. Positions come from
  a sequence, drawn after the writer holds its streams; a writer holds an
  advisory lock per stream it appends to (so the versions it reads stay put
  until it commits), per admission fact it decides on (a unique key, a
  capped queue, a serial schedule) and, for claims under concurrency limits or
  rate classes, one for claims; unrelated writers take none of the same
  locks. Each write transaction, before it draws a position, announces the
  lowest position it could draw as a shared advisory lock (its *marker*); a
  reader that tails the log reads up to the *safe head*, below every marker
  still held, so it never passes a position that a writer still in flight
  may commit later.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from typing import Final

from sqlalchemy import Integer, bindparam, text
from sqlalchemy.engine import Connection
from sqlalchemy.sql.expression import Executable

from headgate._store.sql.schema import POSITIONS, log_head

_HEAD_TABLE: Final = log_head.name
_KEY_SPACE: Final = f"('{_HEAD_TABLE}'::regclass::oid::bigint & 1073741823)::int4"
"""The first half of every advisory lock key of this store: its log head
table's oid, so stores in other schemas of one database never share a lock."""
_LOCKS_SPACE: Final = f"({_KEY_SPACE} | 1073741824)"
"""The key space of the locks writers take on what they decide (streams,
admission facts, claims); markers use `_KEY_SPACE` itself."""
_FENCE: Final = f"({_KEY_SPACE} | 536870912), 0"
"""The lock every writer shares and a rebuild takes alone."""
_MARKER: Final = (
    f"SELECT pg_advisory_xact_lock_shared({_FENCE}),"
    f" pg_advisory_xact_lock_shared({_KEY_SPACE}, "
    f"(coalesce(pg_sequence_last_value('{POSITIONS.name}'::regclass), 0) + 1)"
    "::bit(32)::int4)"
)
"""What a writer holds from its first statement: the fence, shared, and its
marker, the lowest position it could draw (its low 32 bits; a reader rebuilds
the rest from the sequence)."""
_EXCLUDE_WRITERS: Final = text(f"SELECT pg_advisory_xact_lock({_FENCE})")
_MARKERS: Final = text(
    "SELECT virtualtransaction, objid::bigint FROM pg_locks"
    " WHERE locktype = 'advisory' AND objsubid = 2 AND granted"
    f" AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    f" AND classid::bigint = {_KEY_SPACE} AND pid <> pg_backend_pid()"
)
_LAST_DRAWN: Final = text(f"SELECT pg_sequence_last_value('{POSITIONS.name}'::regclass)")
_DRAW: Final = text(
    f"SELECT nextval('{POSITIONS.name}') FROM generate_series(1, :count)"
).bindparams(bindparam("count", type_=Integer))
_LOCK_KEYS: Final = text(
    f"SELECT count(pg_advisory_xact_lock({_LOCKS_SPACE}, hashtext(key)))"
    " FROM (SELECT unnest(CAST(:keys AS text[])) AS key ORDER BY 1) AS wanted"
)


class LogOrder(ABC):
    """What the event log asks of its backend to order and fence its writes."""

    moves_head: bool
    """Whether the log head row holds the last position (moved by each write)."""

    @abstractmethod
    def opening(self, head_read: str) -> str:
        """The statement that opens every write transaction, ending with
        `head_read` (the log head and whether a rebuild is under way)."""

    @abstractmethod
    def entered(self, lock_head: Executable) -> Executable:
        """What a write in a host's own transaction runs first (`lock_head` locks
        the head row): what `opening` holds, without reading anything."""

    @abstractmethod
    def draw(self, connection: Connection, count: int, head: int) -> list[int]:
        """`count` new positions, in order, after `head` (this transaction's)."""

    @abstractmethod
    def lock(self, connection: Connection, keys: Collection[str]) -> None:
        """Hold each of `keys` (e.g. `stream:<id>`) until the transaction ends: no
        other writer holding the same key runs beside it."""

    @abstractmethod
    def safe_head(self, connection: Connection, head: int) -> int:
        """The highest position below which every event is committed or never will
        be (`head`: the head row's, where it is kept)."""

    @abstractmethod
    def exclude_writers(self, connection: Connection) -> None:
        """Hold every other writer off until this transaction ends: wait for those
        in flight, and make those that come wait (a rebuild's transactions)."""

    @property
    def locks_per_stream(self) -> bool:
        """Whether `lock` does anything (else one lock already serialises writes)."""
        return not self.moves_head


class HeadOrder(LogOrder):
    moves_head = True

    def opening(self, head_read: str) -> str:
        return head_read

    def entered(self, lock_head: Executable) -> Executable:
        return lock_head

    def draw(self, connection: Connection, count: int, head: int) -> list[int]:
        return list(range(head + 1, head + count + 1))

    def lock(self, connection: Connection, keys: Collection[str]) -> None:
        return None  # the head's lock already excludes every other writer

    def safe_head(self, connection: Connection, head: int) -> int:
        return head

    def exclude_writers(self, connection: Connection) -> None:
        return None  # every writer holds the head until it commits


class SequenceOrder(LogOrder):
    moves_head = False

    def opening(self, head_read: str) -> str:
        # Two statements, so the second (the rebuild flag's read) has a snapshot
        # taken after the fence is held: a writer that waited for a rebuild's
        # transaction (`exclude_writers`) sees what it committed.
        return f"{_MARKER}; {head_read}"

    def entered(self, lock_head: Executable) -> Executable:
        return text(_MARKER)

    def draw(self, connection: Connection, count: int, head: int) -> list[int]:
        if count <= 0:
            return []
        return [int(position) for (position,) in connection.execute(_DRAW, {"count": count})]

    def lock(self, connection: Connection, keys: Collection[str]) -> None:
        if keys:
            connection.execute(_LOCK_KEYS, {"keys": sorted(set(keys))})

    def safe_head(self, connection: Connection, head: int) -> int:
        # The sequence first, then the markers: a writer takes its marker before it
        # draws, so every position drawn by the first read belongs to a writer
        # whose marker the second read sees, unless it has already ended.
        drawn = int(connection.execute(_LAST_DRAWN).scalar() or 0)
        lowest = min(
            (_unwrapped(int(marker), drawn) for _, marker in connection.execute(_MARKERS)),
            default=drawn + 1,
        )
        return min(drawn, lowest - 1)

    def exclude_writers(self, connection: Connection) -> None:
        # Its own shared hold (taken at its opening) does not stand in its way.
        connection.execute(_EXCLUDE_WRITERS)


def _unwrapped(low_bits: int, drawn: int) -> int:
    """A marker's position from its low 32 bits: the one at or below `drawn + 1`
    (a marker is never further behind the sequence than 2**31 positions)."""
    ceiling = drawn + 1
    return ceiling - ((ceiling - low_bits) % (1 << 32))


def order_for(dialect_name: str) -> LogOrder:
    return SequenceOrder() if dialect_name == "postgresql" else HeadOrder()


def stream_keys(stream_ids: Sequence[str]) -> list[str]:
    return [f"stream:{stream_id}" for stream_id in stream_ids]


__all__ = [
    "HeadOrder",
    "LogOrder",
    "SequenceOrder",
    "order_for",
    "stream_keys",
]
