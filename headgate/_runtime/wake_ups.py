"""What wakes a worker to claim besides a poll: jobs handed over by this process
(claimed with no read first), the instants it knows jobs become due, and the
queues another worker is told of when an end frees a limit's slot."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from headgate._domain.events import JobAttemptFailed, JobSnoozed
from headgate._domain.limits import ConcurrencyLimit
from headgate._runtime.job_units import Claim
from headgate._store.port import SLOTS_FREED, StreamAppend

MAX_CLAIMED_LATELY: Final = 1_024
"""Claimed job ids a worker remembers, to drop a hand-over that came after its claim."""
MAX_DUE_LATER: Final = 1_000
"""Instants a worker keeps to wake at; past it, it keeps the earliest half."""


@dataclass
class HandOvers:
    """What tells a worker to claim with no read first."""

    jobs: set[str] = field(default_factory=set)
    """Jobs enqueued in this process, due and committed, not claimed yet."""
    claimed_lately: dict[str, None] = field(default_factory=dict)
    """The ids of the latest claims (an ordered set): a job handed after its
    claim (the enqueue's notification woke the worker first) is not looked for
    again."""
    notified: bool = False
    """A queue of ours was notified while no hand-over waited for its claim (then
    the notification may be the hand-over's own, and a read decides)."""

    def forget(self, claimed: Iterable[str], passed_over: set[str]) -> None:
        """The handed jobs now claimed, and those a claim with slots left passed
        over (another worker's now, or held by a limit): not looked for again."""
        for job_id in claimed:
            self.claimed_lately[job_id] = None
            self.jobs.discard(job_id)
        while len(self.claimed_lately) > MAX_CLAIMED_LATELY:
            del self.claimed_lately[next(iter(self.claimed_lately))]
        self.jobs -= passed_over


class DueLater:
    """When jobs a worker knows of become due (a heap): the earliest scheduled job
    it read, those it snoozed or retried, a rate class's next free start."""

    def __init__(self) -> None:
        self._instants: list[int] = []

    def add(self, due_ms: int) -> None:
        if due_ms in self._instants:
            return
        heapq.heappush(self._instants, due_ms)
        if len(self._instants) > MAX_DUE_LATER:  # the latest are found again by reads
            self._instants = heapq.nsmallest(MAX_DUE_LATER // 2, self._instants)

    def take_next(self, now_ms: int) -> int | None:
        """The next instant to wake at (now, if one has passed); those passed are
        dropped, as this wake claims them."""
        if not self._instants:
            return None
        next_ms = max(self._instants[0], now_ms)
        while self._instants and self._instants[0] <= now_ms:
            heapq.heappop(self._instants)
        return next_ms


def freed_queues(limits: Sequence[ConcurrencyLimit], ending: Iterable[Claim]) -> list[str]:
    """What to notify of these ending jobs' ends that free a concurrency limit's
    slot another worker may wait for: the limit's queue, or `SLOTS_FREED` for a
    limit on every queue (only these ends: a notification costs every commit
    that sends one)."""
    freed: set[str] = set()
    for claimed in ending:
        for limit in limits:
            if limit.covers(claimed.queue, claimed.kind, claimed.partition_key):
                freed.add(SLOTS_FREED if limit.queue is None else claimed.queue)
    return sorted(freed)


def due_again_ms(ends: Sequence[StreamAppend]) -> set[int]:
    """When the jobs whose ends these record run again (a snooze, a retry): the
    worker claims each then, not at its next poll."""
    due: set[int] = set()
    for append in ends:
        event = append.events[0]
        if isinstance(event, JobSnoozed):
            due.add(event.run_at_ms)
        elif isinstance(event, JobAttemptFailed) and event.retry_at_ms is not None:
            due.add(event.retry_at_ms)
    return due
