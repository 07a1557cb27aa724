"""Compaction's report and its driver; what it keeps is the domain's
(`headgate._domain.retention`).

The driver (`run_compaction`) is every store's: it decides the order of the
steps, how much goes in one write transaction, when a cancelled run stops
and that the examined position moves only when a run completes. A store
gives the steps (`CompactionSteps`), each within a write transaction that
carries the fence.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from headgate._domain.retention import DAY_MS, CompactionPolicy
from headgate._store.port.leases import Fence

__all__ = [
    "DAY_MS",
    "JOBS_PER_TRANSACTION",
    "STREAMS_PER_TRANSACTION",
    "CompactionPolicy",
    "CompactionReport",
    "CompactionSteps",
    "run_compaction",
]

STREAMS_PER_TRANSACTION: Final = 50
JOBS_PER_TRANSACTION: Final = 500
"""Small transactions, so other writers (the scheduler's ticks above all) never
wait for more than one of them."""

Transaction = TypeVar("Transaction")


@dataclass(frozen=True)
class CompactionReport:
    streams_examined: int
    events_deleted: int
    jobs_removed: int


class CompactionSteps(ABC, Generic[Transaction]):
    """What a store does for the compaction driver. The projection rows of what a
    step deletes go in the same transaction, so a rebuild from the compacted
    log reproduces the live projections exactly."""

    @abstractmethod
    def streams_to_examine(self) -> tuple[list[str], int]:
        """The streams that may be trimmed with an event written since the last
        completed run, by id, and the log position they were read up to."""

    @abstractmethod
    def write(self, fence: Fence | None) -> AbstractContextManager[Transaction]:
        """A write transaction (refused with LeaseLost once `fence`'s lease moved on)."""

    @abstractmethod
    def trim(self, transaction: Transaction, streams: list[str], policy: CompactionPolicy) -> int:
        """Delete what the retention rules do not keep of these streams; how many events."""

    @abstractmethod
    def remove_finished_jobs(
        self, transaction: Transaction, policy: CompactionPolicy, limit: int
    ) -> tuple[int, int]:
        """Remove up to `limit` jobs finished longer ago than the retention, with
        their streams and rows: (jobs removed, events deleted)."""

    @abstractmethod
    def expire_manual_keys(self, transaction: Transaction, policy: CompactionPolicy) -> int:
        """Delete the manual-run keys past their retention; how many events."""

    @abstractmethod
    def mark_examined(self, transaction: Transaction, position: int) -> None:
        """The next run examines only streams written after `position`."""

    def after_run(self) -> None:
        """Upkeep once a run completes (the SQL store reclaims space)."""


def run_compaction(
    steps: CompactionSteps[Transaction],
    policy: CompactionPolicy | None = None,
    cancel: threading.Event | None = None,
    fence: Fence | None = None,
    *,
    streams_per_transaction: int = STREAMS_PER_TRANSACTION,
    jobs_per_transaction: int = JOBS_PER_TRANSACTION,
) -> CompactionReport:
    """One compaction run: trim the streams written since the last run, remove the
    finished jobs past retention, expire manual-run keys, then move the
    examined position. With `cancel` set it stops between transactions (a run
    cut short is simply done again); with `fence`, every transaction is
    refused once the lease has moved on or expired."""
    policy = policy or CompactionPolicy()
    stopped = cancel or threading.Event()
    touched, until = steps.streams_to_examine()
    deleted = jobs_removed = 0
    for start in range(0, len(touched), streams_per_transaction):
        if stopped.is_set():
            return CompactionReport(len(touched), deleted, jobs_removed)
        with steps.write(fence) as transaction:
            chunk = touched[start : start + streams_per_transaction]
            deleted += steps.trim(transaction, chunk, policy)
    while not stopped.is_set():
        with steps.write(fence) as transaction:
            removed, job_events = steps.remove_finished_jobs(
                transaction, policy, jobs_per_transaction
            )
        jobs_removed, deleted = jobs_removed + removed, deleted + job_events
        if removed < jobs_per_transaction:
            break
    if stopped.is_set():
        return CompactionReport(len(touched), deleted, jobs_removed)
    with steps.write(fence) as transaction:
        deleted += steps.expire_manual_keys(transaction, policy)
        steps.mark_examined(transaction, until)
    steps.after_run()
    return CompactionReport(len(touched), deleted, jobs_removed)
