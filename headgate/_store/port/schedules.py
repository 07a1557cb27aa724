"""Schedule reads: the schedules' rows, the scheduler's due read, and each
schedule's enqueue history."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from dataclasses import dataclass

from headgate._domain.schedule_health import HealthState, RunFacts, run_outcome
from headgate._projections import EnqueueEventRow, ScheduleRow, ScheduleRunRow
from headgate._store.port.paging import Page


@dataclass(frozen=True)
class RunRead:
    """A schedule's run with its job's state now (`schedule_health.run_outcome`
    tells what became of it from the two)."""

    run: ScheduleRunRow
    job_state: str | None
    """None: the job is gone (removed by compaction's retention)."""

    def facts(self) -> RunFacts:
        run = self.run
        return RunFacts(
            outcome=run_outcome(run.state, self.job_state),
            tick_ms=run.tick_ms,
            enqueued_at_ms=run.enqueued_at_ms,
            started_at_ms=run.started_at_ms,
            finished_at_ms=run.finished_at_ms,
            error_type=run.error_type,
        )


@dataclass(frozen=True)
class HealthFilter:
    """Only the schedules in `state` at `now_ms` (see `_domain/schedule_health`)."""

    state: HealthState
    now_ms: int
    grace_ms: int


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
        self,
        limit: int,
        cursor: str | None,
        search: str | None = None,
        health: HealthFilter | None = None,
    ) -> Page[ScheduleRow]:
        """Live (not deleted) schedules ordered by id, code point by code point (the
        same order on every backend); with `search`, only those whose id starts
        with it (case and all: a prefix, matched exactly). A page costs about
        `limit` rows whatever the number of schedules. A search no id could hold
        (too long, a NUL) matches nothing. ValidationError for a bad limit or a
        cursor this list did not return.

        With `health`, only the schedules in that state, judged from each one's
        row and its newest settled and waiting runs (`_domain/schedule_health`:
        a schedule whose newest settled run failed is failing): each schedule
        the search's range holds is examined, a few index lookups each."""

    @abstractmethod
    def schedule_count(self, search: str | None = None, health: HealthFilter | None = None) -> int:
        """How many live schedules `schedules_page` lists with this `search` and
        `health`: one count over its index's range, in one statement."""

    @abstractmethod
    def schedule_runs(self, schedule_id: str, limit: int, cursor: str | None) -> Page[RunRead]:
        """The schedule's runs (its ticks' jobs and its Enqueue now's), newest
        first, the newest 100 only; they outlive the schedule. ValidationError
        for a bad limit or cursor."""

    @abstractmethod
    def recent_runs(
        self, schedule_ids: Collection[str], per_schedule: int
    ) -> dict[str, list[RunRead]]:
        """Each schedule's newest `per_schedule` runs (at most 100), newest first,
        by id, in one read for any number of ids; a schedule with no run is
        absent."""

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
    ) -> Page[EnqueueEventRow]:
        """The schedule's automatic attempts, newest first, the newest 100 only; it
        outlives the schedule. ValidationError for a bad limit or cursor."""
