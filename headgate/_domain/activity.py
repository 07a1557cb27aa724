"""The per-minute activity roll-up the console's overview draws: pure functions.

Once a minute the scheduler lease's holder rolls up the minute that closed
(`roll_up`): ticks by outcome, jobs started, succeeded, failed, snoozed and
expired, tick lateness and job pickup percentiles, from the rows the store
already keeps (the enqueue history, the attempt history, the jobs); and, as
they stand at that moment, each queue's depth and oldest pending age and
what runs under each concurrency limit. Each figure is a point (minute,
series, key, value); the store keeps `KEEP_MS` of them, so the overview
reads a bounded table, never the log. A minute has a bounded number of points
whatever clients do: the CHART_SHOWN deepest queues and busiest limits have
their own, the rest are summed under `_other` (`headgate._domain.shown`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from headgate._domain.lifecycle import STARTED_OUTCOMES
from headgate._domain.shown import CHART_SHOWN, OTHER, busiest

MINUTE_MS: Final = 60_000
KEEP_MS: Final = 24 * 3600 * 1000
"""A day of minutes is kept; older points are dropped as new ones are written."""
SHOWN_MS: Final = 3 * 3600 * 1000
"""The overview's default span: the last three hours."""

TICKS: Final = "ticks"
JOBS: Final = "jobs"
TICK_LATENESS: Final = "tick_lateness_ms"
PICKUP: Final = "pickup_ms"
QUEUE_DEPTH: Final = "queue_depth"
OLDEST_PENDING: Final = "oldest_pending_s"
LIMIT_RUNNING: Final = "limit_running"
LIMIT: Final = "limit"
SERIES: Final = (
    TICKS,
    JOBS,
    TICK_LATENESS,
    PICKUP,
    QUEUE_DEPTH,
    OLDEST_PENDING,
    LIMIT_RUNNING,
    LIMIT,
)
JOB_OUTCOMES: Final = ("started", "succeeded", "failed", "snoozed", "expired")
"""The keys of the jobs series (an attempt that timed out counts as failed)."""
RAN: Final = STARTED_OUTCOMES
"""Attempt-history outcomes of attempts that started (a retry's row is not one)."""


@dataclass(frozen=True)
class ActivityPoint:
    minute_ms: int
    """The minute's start, epoch ms (a multiple of MINUTE_MS)."""
    series: str
    key: str
    value: float


@dataclass(frozen=True)
class MinuteRows:
    """What the store holds of one minute, as the roll-up reads it."""

    ticks: Sequence[tuple[str, int]] = ()
    """(outcome, lateness ms) of each enqueue attempt recorded in the minute."""
    attempts: Sequence[tuple[str, int | None]] = ()
    """(outcome, pickup ms or None) of each attempt that ended in the minute: its
    start after the job was due, when the job's row still says when that was."""
    expired: int = 0
    started_ended: int = 0
    """Attempts that started in the minute and have ended since (in it or later)."""
    started_running: int = 0
    """Jobs running now that were claimed in the minute (their attempts have not
    ended, so the attempt history has no row for them yet). With `started_ended`,
    every attempt started in the minute, each counted once: in the minute it
    started, whenever it ends."""


@dataclass(frozen=True)
class Snapshot:
    """What stands when the minute is rolled up."""

    pending: Mapping[str, int] = field(default_factory=dict)
    """queue -> its pending jobs."""
    oldest_pending_s: Mapping[str, float] = field(default_factory=dict)
    limits: Sequence[tuple[str, int, int]] = ()
    """(scope, running, limit) of each concurrency limit."""


def minute_of(instant_ms: int) -> int:
    return instant_ms - instant_ms % MINUTE_MS


def roll_up(minute_ms: int, rows: MinuteRows, snapshot: Snapshot) -> list[ActivityPoint]:
    """The minute's points, every series present (a zero is a point too, so a
    quiet minute shows as quiet, not as missing)."""
    points: list[ActivityPoint] = []

    def add(series: str, key: str, value: float) -> None:
        points.append(ActivityPoint(minute_ms, series, key, value))

    ticks = Counter(outcome for outcome, _ in rows.ticks)
    for outcome in ("enqueued", "deduplicated", "skipped", "failed"):
        add(TICKS, outcome, ticks[outcome])
    ran = [(outcome, pickup) for outcome, pickup in rows.attempts if outcome in RAN]
    ended = Counter(_job_outcome(outcome) for outcome, _ in ran)
    ended["started"] = rows.started_ended + rows.started_running
    ended["expired"] = rows.expired
    for outcome in JOB_OUTCOMES:
        add(JOBS, outcome, ended[outcome])
    for key, value in percentiles([lateness for _, lateness in rows.ticks]).items():
        add(TICK_LATENESS, key, value)
    pickups = [pickup for _, pickup in ran if pickup is not None]
    for key, value in percentiles(pickups).items():
        add(PICKUP, key, value)
    queues = sorted(set(snapshot.pending) | set(snapshot.oldest_pending_s))
    shown = busiest(queues, CHART_SHOWN, lambda queue: snapshot.pending.get(queue, 0))
    for queue in shown.items:
        if queue in snapshot.pending:
            add(QUEUE_DEPTH, queue, snapshot.pending[queue])
        if queue in snapshot.oldest_pending_s:
            add(OLDEST_PENDING, queue, snapshot.oldest_pending_s[queue])
    if shown.more:
        rest = set(queues) - set(shown.items)
        add(QUEUE_DEPTH, OTHER, sum(snapshot.pending.get(queue, 0) for queue in rest))
        ages = [snapshot.oldest_pending_s[q] for q in rest if q in snapshot.oldest_pending_s]
        add(OLDEST_PENDING, OTHER, max(ages, default=0.0))
    limits = busiest(snapshot.limits, CHART_SHOWN, lambda limit: limit[1])
    for scope, running, limit in limits.items:
        add(LIMIT_RUNNING, scope, running)
        add(LIMIT, scope, limit)
    if limits.more:
        left_out = [limit for limit in snapshot.limits if limit not in limits.items]
        add(LIMIT_RUNNING, OTHER, sum(running for _, running, _ in left_out))
        add(LIMIT, OTHER, sum(limit for _, _, limit in left_out))
    return points


def _job_outcome(attempt_outcome: str) -> str:
    return "failed" if attempt_outcome == "timed_out" else attempt_outcome


def percentiles(values: Iterable[int]) -> dict[str, float]:
    """p50 and p99 (nearest rank); empty when there are no values."""
    ordered = sorted(values)
    if not ordered:
        return {}
    return {
        "p50": float(ordered[_rank(len(ordered), 0.50)]),
        "p99": float(ordered[_rank(len(ordered), 0.99)]),
    }


def _rank(count: int, fraction: float) -> int:
    return min(max(int(-(-count * fraction // 1)) - 1, 0), count - 1)
