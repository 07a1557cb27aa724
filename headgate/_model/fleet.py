"""The public read types of the fleet and flow control: workers, handlers, queues,
quarantine, limits, rate classes, the lease and readiness."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from headgate._domain.limits import RunningKey
from headgate._projections import (
    ConcurrencyLimitRow,
    QuarantineRow,
    RateLimitRow,
)
from headgate._store.port import DeclaredHandler as DeclaredHandlerRow
from headgate._store.port import LimitsState


@dataclass(frozen=True)
class DeclaredHandler:
    """A handler a declarations group's code registers, as the store keeps it:
    the defaults its jobs are enqueued with by a process without it."""

    kind: str
    queue: str
    priority: int
    start_within_ms: int | None
    partition_key: str | None
    rate_class: str | None
    declared_by: str
    """The declarations group (`RuntimeConfig.declarations_group`)."""
    host: str
    """The process (host:pid) that recorded it as it is."""
    declared_at_ms: int
    """Since when it is declared as it is."""

    @classmethod
    def from_row(cls, row: DeclaredHandlerRow) -> DeclaredHandler:
        d = row.declaration
        return cls(
            d.kind,
            d.queue,
            d.priority,
            d.start_within_ms,
            d.partition_key,
            d.rate_class,
            row.declared_by,
            row.host,
            row.declared_at_ms,
        )


@dataclass(frozen=True)
class WorkerStatus:
    """A live worker process."""

    worker_id: str
    host: str
    pid: int
    queues: dict[str, int]
    """queue -> capacity."""
    running: int
    overdue: int
    """Handlers still running past their timeout."""
    started_at_ms: int
    heartbeat_at_ms: int
    expires_at_ms: int
    running_job_ids: tuple[str, ...] = ()
    """The jobs it runs now (of the first RUNNING_SHOWN running jobs in the store)."""
    kinds: tuple[str, ...] | None = None
    """The job kinds it has handlers for, sorted; None when its build did not say."""


QUARANTINE_SAMPLED = 200
"""Quarantined jobs `hg.quarantine.list` reads to name each entry's kind and a job."""


RUNNING_SHOWN = 200
"""Running jobs `hg.runtime.workers` reads to say which worker runs which."""


@dataclass(frozen=True)
class QuarantineEntry:
    """A quarantined kind+payload fingerprint: its jobs are refused and its
    schedules' ticks recorded `skipped/quarantined` until it is released."""

    fingerprint: str
    note: str
    """Why: the crash limit (naming the job) or an operator's note."""
    quarantined_at_ms: int
    kind: str | None = None
    """The kind of its newest job held in quarantine (`hg.quarantine.list`); None
    where none is among the newest QUARANTINE_SAMPLED quarantined jobs (a
    fingerprint quarantined by hand before any of its jobs crashed)."""
    sample_job_id: str | None = None
    """That job, to open: its payload and attempts say what crashed."""

    @classmethod
    def from_row(cls, row: QuarantineRow) -> QuarantineEntry:
        return cls(row.fingerprint, row.note, row.quarantined_at_ms)


@dataclass(frozen=True)
class QuarantinePage:
    entries: list[QuarantineEntry]
    next_cursor: str | None


@dataclass(frozen=True)
class QueueStatus:
    """A queue: whether it is paused, and its jobs waiting and running."""

    name: str
    paused: bool
    pending: int = 0
    running: int = 0
    paused_at_ms: int | None = None
    note: str = ""
    """The operator's note when it was paused."""


@dataclass(frozen=True)
class ConcurrencyLimitStatus:
    """A fleet-wide limit on running jobs, and how many of its scope run now.

    Each of `queue`, `kind` and `partition_key` is None for "any";
    `partition_key` "*" gives every partition key its own limit, and then
    `running_by_partition` says how many run per key (the busiest first)."""

    queue: str | None
    kind: str | None
    partition_key: str | None
    limit: int
    running: int
    """Jobs of its scope running now (under "*": across every key)."""
    set_at_ms: int
    running_by_partition: tuple[tuple[str, int], ...] = ()


def limit_statuses(state: LimitsState) -> list[ConcurrencyLimitStatus]:
    """Each concurrency limit with the jobs of its scope running now."""
    return [limit_status(row, state.running) for row in state.limits]


def limit_status(
    row: ConcurrencyLimitRow, running: Mapping[RunningKey, int]
) -> ConcurrencyLimitStatus:
    """A concurrency limit with the jobs of its scope among `running`."""
    limit = row.limit()
    by_key: dict[str, int] = {}
    total = 0
    for (queue, kind, partition_key), count in running.items():
        if limit.covers(queue, kind, partition_key):
            total += count
            if limit.per_partition and partition_key is not None:
                by_key[partition_key] = by_key.get(partition_key, 0) + count
    busiest = sorted(by_key.items(), key=lambda item: (-item[1], item[0]))
    return ConcurrencyLimitStatus(
        row.queue,
        row.kind,
        row.partition_key,
        row.max_running,
        total,
        row.set_at_ms,
        tuple(busiest[:MAX_PARTITIONS_SHOWN]),
    )


def rate_statuses(state: LimitsState) -> list[RateStatus]:
    return [rate_status(row, state.started.get(row.rate_class, 0)) for row in state.rates]


def rate_status(row: RateLimitRow, started: int) -> RateStatus:
    return RateStatus(row.rate_class, row.max_starts, row.per_ms, started, row.set_at_ms)


MAX_PARTITIONS_SHOWN: Final = 20
"""A per-partition limit shows its busiest keys, at most this many."""


@dataclass(frozen=True)
class RateStatus:
    """A rate class: at most `limit` of its jobs start in any `per_ms` window."""

    rate_class: str
    limit: int
    per_ms: int
    started: int
    """Its jobs started within the window that ends now."""
    set_at_ms: int


@dataclass(frozen=True)
class LeaseStatus:
    holder: str
    host: str
    pid: int
    term: int
    expires_at_ms: int


@dataclass(frozen=True)
class SchedulerHealth:
    """Whether anybody fires the ticks (`hg.runtime.scheduler_health`): `state` is
    `ok`, `no_scheduler` (schedules due past the grace and no process holds the
    scheduler lease) or `behind` (a holder, yet schedules due past the grace)."""

    state: str
    message: str
    holder: LeaseStatus | None
    """Who holds the scheduler lease, if anybody does."""
    oldest_due_ms: int | None
    """When the schedule due longest became due (None: none is due)."""
    behind_ms: int
    """How long it has waited (0 when none is due)."""
    grace_ms: int
    """How long a due schedule may wait before it is reported (a takeover's time)."""


@dataclass(frozen=True)
class Readiness:
    """Whether this Headgate can serve now: its store answers and is at this build's
    schema revision (what GET /readyz reports)."""

    ready: bool
    reason: str | None = None
    """Why not, as a stable code: `store_unreachable`, `store_closed`,
    `schema_behind`, `schema_too_new` or `schema_incomplete` (a table missing)."""
    detail: str | None = None
    """The error behind the reason, for the operator's log, its passwords masked:
    it may name the store's host and carry the driver's message."""
    schema_revision: int | None = None
    """The store's schema revision, when it answered with this build's."""
    error_type: str | None = None
    """The class of the error behind the reason, and of the driver's error behind
    that (`StoreUnavailable from OperationalError`)."""


@dataclass(frozen=True)
class UnservedWork:
    """Pending jobs of a kind on a queue that no live worker runs."""

    queue: str
    kind: str
    pending: int
    reason: str
    """In words: "no worker is running", "no live worker runs kind k on queue q"."""
