"""Store figures: what the metrics read from the store at scrape time."""

from __future__ import annotations

from abc import ABC, abstractmethod


class StoreFigures(ABC):
    """Aggregates for metrics, read at each scrape (committed state only). A
    database answers each with one aggregate over an index, so a scrape costs
    the same however much the store holds."""

    @abstractmethod
    def due_count(self, now_ms: int) -> int:
        """How many live, unpaused schedules are due by `now_ms` (the scheduler's
        backlog): a count over the due index's range, read in one statement."""

    @abstractmethod
    def job_counts(self) -> dict[tuple[str, str], int]:
        """Jobs by (queue, state), for every job the projection holds (finished
        ones until compaction removes them); pairs with no job are absent."""

    @abstractmethod
    def oldest_pending(self) -> dict[str, int]:
        """Per queue that has pending jobs, the earliest run_at_ms among them (a job
        that became due, or is to run, at that instant); queues with none are absent."""

    @abstractmethod
    def quarantined_count(self) -> int:
        """How many fingerprints are quarantined now."""

    @abstractmethod
    def undeclared_count(self) -> int:
        """How many live schedules are declared by no code any more (their group's
        runtime started without declaring them): each wants an operator."""
