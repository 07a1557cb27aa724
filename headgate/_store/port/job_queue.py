"""The job queue: jobs waiting, claimed, running and done, and the wake-ups
that tell workers there is something to claim."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final

from headgate._domain.limits import RunningKey, Slots
from headgate._projections import (
    ConcurrencyLimitRow,
    JobAttemptRow,
    JobRow,
    PausedQueueRow,
    RateLimitRow,
)
from headgate._store.port.paging import Page


@dataclass(frozen=True)
class JobFilter:
    """Which jobs a listing shows (None: any)."""

    state: str | None = None
    queue: str | None = None
    kind: str | None = None
    schedule_id: str | None = None
    """Jobs of this schedule's ticks."""
    run_now_schedule_id: str | None = None
    """Jobs this schedule's Enqueue now made."""
    made_by_schedule: str | None = None
    """Jobs this schedule made: its ticks' and its Enqueue now's."""
    search: str | None = None
    """Jobs whose id or unique key is this text (each an index lookup)."""
    search_ids: tuple[str, ...] = ()
    """Further job ids the search names (with `search`): the Enqueue now job an
    idempotency key names within its schedule, which the caller derives."""


STATE_COUNT_CAP: Final = 10_000
"""`JobReads.state_counts` counts each state up to this many: a tab shows
"10,000+" rather than walking a million rows on every page view."""


class JobQueue(ABC):
    """The job queue's part of a write transaction: what workers claim, the
    rescuer takes back and a command changes, read where it is changed.

    A job row's `version` is its stream's version, so a caller may append the
    job's next transition at it without reading the stream: two writers that
    read the same row cannot both move the job on.
    """

    @abstractmethod
    def job(self, job_id: str) -> JobRow | None:
        """The job's projection row, or None."""

    @abstractmethod
    def jobs(self, job_ids: Collection[str]) -> dict[str, JobRow]:
        """The rows of those jobs that exist, by id."""

    @abstractmethod
    def job_for_tick(self, schedule_id: str, tick_ms: int) -> JobRow | None:
        """The job crediting this (schedule, tick) as its periodic origin, in any
        state, or None (there is at most one: the store's unique index)."""

    @abstractmethod
    def claim(
        self,
        capacity: Mapping[str, int],
        timeouts_ms: Mapping[str, int],
        worker_id: str,
        now_ms: int,
    ) -> list[JobRow]:
        """Claim the pending jobs of these kinds (the keys of `timeouts_ms`) whose
        run_at_ms has come, per queue at most `capacity[queue]`, the highest
        priority first, then the lowest fair turn (`fair_share`), then the
        oldest run_at, then by id: each becomes running on `worker_id`, timing
        out at `now_ms` plus its own timeout or else its kind's. Returns the
        rows as claimed, in that order. A paused queue (a row of the
        paused_queues projection) gives none: the claim reads the pause in its
        own transaction, so a pause committed before it holds.

        The claim keeps the concurrency and rate limits (`limits`): it takes a
        job only if every limit covering it has room, counting the jobs running
        now and, per rate class, the starts within its window; those it passes
        over stay pending, in order. It records the starts of the rate-limited
        jobs it takes, and forgets those its window has passed.

        A claim is operational state of the job's row, as a heartbeat is, not an
        event: the row's version (its stream's) stays, and the attempt's end is
        appended at it. Every way a running job leaves its worker (a rescue, a
        release, a cancel) is an event, which moves the version on and so
        refuses that worker's late end. A rebuild of the jobs projection keeps
        the claims of the jobs it finds running."""

    @abstractmethod
    def late_jobs(
        self, queues: Collection[str], kinds: Collection[str], now_ms: int, limit: int
    ) -> list[JobRow]:
        """Pending jobs of these kinds on these queues (paused ones included) whose
        start deadline (`start_by_ms`) is before `now_ms`, the earliest deadline
        first (then by id), at most `limit`: what a worker expires in bulk before
        it claims, so late jobs take none of its slots. Read on an index of the
        pending jobs that have a deadline, by deadline."""

    @abstractmethod
    def rate_slot_frees_at(self, now_ms: int) -> int | None:
        """The earliest instant after `now_ms` at which a rate class used up at
        `now_ms` (as many starts within its window as its limit) may start a job
        again: when the start that fills it leaves its window. None when no class
        is used up. A worker whose claim passed over jobs sleeps until then
        (`now_ms` is the transaction's, as its claim's: the two agree on the
        store's clock)."""

    @abstractmethod
    def running_on(self, worker_ids: Collection[str]) -> list[JobRow]:
        """Jobs in state running on these workers."""

    @abstractmethod
    def pending_like(self, kind: str, payload: str, limit: int) -> list[JobRow]:
        """Pending jobs of this kind with exactly this payload (its canonical JSON
        text, as stored): one fingerprint's jobs waiting to run, oldest run_at
        first (then by id), at most `limit`. A rare read (a quarantine's), so
        it may scan the pending jobs."""

    @abstractmethod
    def notify_enqueued(self, queues: Collection[str]) -> None:
        """When this transaction commits, wake the workers of other processes that
        listen (see `Store.listen`) for these queues; nothing where the backend
        cannot notify (they poll)."""

    @abstractmethod
    def notify_jobs_taken(self) -> None:
        """When this transaction commits, tell the listening workers of every
        process (their listener hears `JOBS_TAKEN`) that running jobs were taken
        from their workers (cancelled): each looks at its running jobs now and
        tells the handlers of those no longer its own to stop. Where the backend
        cannot say what changed (SQLite: any commit wakes a listener with None),
        a worker looks at its running jobs when woken."""


class JobReads(ABC):
    """The jobs as workers, the API and the console read them, each read on its
    own (committed state only)."""

    @abstractmethod
    def job(self, job_id: str) -> JobRow | None:
        """The job's row, or None."""

    @abstractmethod
    def jobs(self, job_ids: Collection[str]) -> dict[str, JobRow]:
        """The rows of those jobs that exist, by id, in one read (a worker looking
        at the jobs it runs, to tell the handlers of those taken from it)."""

    @abstractmethod
    def jobs_page(self, where: JobFilter, limit: int, cursor: str | None) -> Page[JobRow]:
        """Jobs matching `where`, newest first (by creation, then id); bounded pages
        with an opaque cursor. ValidationError for a bad limit or cursor."""

    @abstractmethod
    def state_counts(self, where: JobFilter, cap: int) -> dict[str, int]:
        """Per job state, how many jobs match `where` (its `state` ignored), each
        counted up to `cap` (a count equal to `cap` means that many or more);
        every state present, 0 where none match."""

    @abstractmethod
    def job_attempts(self, job_id: str, limit: int) -> list[JobAttemptRow]:
        """The job's ended attempts, newest first, at most `limit`."""

    @abstractmethod
    def latest_attempts(self, job_ids: Collection[str]) -> dict[str, JobAttemptRow]:
        """Each job's newest ended attempt, by job id, in one read (the jobs list's
        duration and error columns); a job with none is left out."""

    @abstractmethod
    def earliest_claimable(self, queues: Collection[str], kinds: Collection[str]) -> int | None:
        """The earliest run_at_ms among pending jobs of these kinds on these queues
        (a job scheduled for later: when to look again), or None."""

    @abstractmethod
    def next_claimable_at(
        self, queues: Collection[str], kinds: Collection[str], now_ms: int
    ) -> int | None:
        """The earliest instant after `now_ms` at which time alone may make a
        pending job of these kinds on these queues claimable: the earliest run_at_ms
        after `now_ms` (paused queues and serial jobs waiting their turn left out,
        as earliest_claimable leaves them), or a rate class used up at `now_ms`
        freeing a start (`JobQueue.rate_slot_frees_at`). None when neither. What an
        idle worker sleeps until, asked after each claim that left slots free; a
        concurrency limit freeing is no instant, and wakes workers by notification."""

    @abstractmethod
    def pending_work(self) -> dict[tuple[str, str], int]:
        """Pending jobs by (queue, kind): to tell those no live worker serves."""

    @abstractmethod
    def paused_queues(self) -> dict[str, PausedQueueRow]:
        """The paused queues, by name in name order: a claim takes no job from them,
        and earliest_claimable leaves them out."""

    @abstractmethod
    def limits_state(self, now_ms: int) -> LimitsState:
        """The concurrency limits (by scope) and rate limits (by class), the jobs
        running by (queue, kind, partition key), and each rate class's starts
        within its window ending at `now_ms`."""


@dataclass(frozen=True)
class LimitsState:
    """The fleet-wide limits and where they stand: what the API, the console and
    a job's "why is it waiting" read."""

    limits: list[ConcurrencyLimitRow]
    rates: list[RateLimitRow]
    running: dict[RunningKey, int]
    """Running jobs by (queue, kind, partition key)."""
    started: dict[str, int]
    """Per rate class, its starts within its window."""

    def slots(self) -> Slots:
        return Slots.counted(
            [row.limit() for row in self.limits],
            {row.rate_class: row.limit() for row in self.rates},
            self.running,
            self.started,
        )


JOBS_TAKEN: Final = "!taken"
"""What a listener hears after `notify_jobs_taken`: no queue's name (a queue's
starts with a letter or digit)."""
SLOTS_FREED: Final = "!freed"
"""What a worker notifies (`notify_enqueued`) when an end frees a slot of a
concurrency limit that names no queue: every listening worker looks again."""


JOBS_ENDED: Final = "!ended"
"""What a listener hears after a write that ended jobs for good (completed or
failed): those waiting for a job's result look at it again."""


class Listener(ABC):
    """A running subscription to enqueue notifications from other processes."""

    @abstractmethod
    def close(self) -> None:
        """Stop listening (waits for the listening thread)."""
