"""How the SQL log gives events their positions, and what a writer locks.

Two ways, one per backend (docs/explanation/log-positions.md holds the
argument for each; each backend's dialect gives its own, `Dialect.log_order`):

* `HeadOrder` (SQLite): the log head is one row every write transaction
  locks from its first statement (SQLite's write lock does the same), so
  positions are handed out gap-free in commit order and nothing a write reads
  can change before it commits.
* `postgresql.SequenceOrder`: no row every writer takes. Positions come from
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
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection
from sqlalchemy.sql.expression import Executable


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

    def insert_drawing(
        self, connection: Connection, table: Table, rows: Sequence[dict[str, Any]]
    ) -> list[int] | None:
        """Insert the event `rows` (without their positions) into `table` at
        positions drawn in the same statement, in the rows' order; the positions.
        None where this order does not (then `draw`, and insert them as any rows)."""
        return None

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


def stream_keys(stream_ids: Sequence[str]) -> list[str]:
    return [f"stream:{stream_id}" for stream_id in stream_ids]
