"""Schedule reads: the schedules' rows, the scheduler's due read, and each
schedule's enqueue history."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection

from headgate._projections import EnqueueHistoryRow, ScheduleRow
from headgate._store.port.paging import Page


class ScheduleLookups(ABC):
    """The schedules' part of a write transaction: the rows a command or a tick
    batch decides on, read in the transaction that changes them.

    A schedule row's `version` is its stream's version (every event of the
    stream folds into the row), so a caller may append at it without reading
    the stream.
    """

    @abstractmethod
    def schedule(self, schedule_id: str) -> ScheduleRow | None:
        """The schedule's projection row (deleted ones included), or None."""

    @abstractmethod
    def schedules(self, schedule_ids: Collection[str]) -> dict[str, ScheduleRow]:
        """The projection rows (deleted ones included) of those schedules that have
        one, by id, read in bulk: a few queries for any number of ids, not one
        per id. Ids no store could hold are simply absent. Like every read
        here, it sees this transaction's own appends.
        """

    @abstractmethod
    def declared_schedules(self, declared_by: str) -> list[ScheduleRow]:
        """The live (not deleted) schedules whose definition the host's code of this
        declarations group declares, or declared before it was undeclared; any order."""


class ScheduleReads(ABC):
    """The schedules as the scheduler, the API and the console read them, each
    read on its own (committed state only).

    Ids a store could not hold (NUL, lone surrogates, over-long) are simply
    absent: no query is sent with text the database would reject.
    """

    @abstractmethod
    def schedule(self, schedule_id: str) -> ScheduleRow | None:
        """The schedule's row (deleted ones included), or None."""

    @abstractmethod
    def schedules_page(
        self, limit: int, cursor: str | None, search: str | None = None
    ) -> Page[ScheduleRow]:
        """Live (not deleted) schedules ordered by id, code point by code point (the
        same order on every backend); with `search`, only those whose id starts
        with it (case and all: a prefix, matched exactly). A page costs about
        `limit` rows whatever the number of schedules. A search no id could hold
        (too long, a NUL) matches nothing. ValidationError for a bad limit or a
        cursor this list did not return."""

    @abstractmethod
    def schedule_count(self, search: str | None = None) -> int:
        """How many live schedules `schedules_page` lists with this `search`:
        one count over its index's range, in one statement."""

    @abstractmethod
    def spec_counts(self, excluding: Collection[str] = ()) -> dict[str, int]:
        """How many live schedules (not deleted, not finished; paused ones too)
        have each spec, leaving out those `excluding` names (the ones a write is
        about to replace): what the store-wide ceilings weigh
        (`headgate._domain.schedule_load`). One grouped read of the schedules,
        and one lookup of `excluding` in bulk."""

    @abstractmethod
    def due_schedules(self, now_ms: int, limit: int) -> list[ScheduleRow]:
        """Live, unpaused schedules due by `now_ms`, oldest due first, at most `limit`:
        bounded however many schedules exist."""

    @abstractmethod
    def earliest_due_at(self) -> int | None:
        """When the next live, unpaused schedule is due, or None if there is none."""

    @abstractmethod
    def enqueue_history(
        self, schedule_id: str, limit: int, cursor: str | None
    ) -> Page[EnqueueHistoryRow]:
        """The schedule's automatic attempts, newest first, the newest 100 only; it
        outlives the schedule. ValidationError for a bad limit or cursor."""
