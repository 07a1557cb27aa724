"""The flow-control facts on SQL, read only: the limits and rate classes, what runs
by scope, each rate class's starts within its window and when a used-up one
frees a start, and the admission gate's fair-share turns. The rules they feed
are the domain's (`limits.Slots`, `claim_policy`, `fair_share`); the claim
(`claiming`) reads them in its own transaction.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from sqlalchemy import BigInteger, Integer, String, bindparam, func, select, text
from sqlalchemy.engine import Connection

from headgate._domain.fair_share import Lane, Turns
from headgate._domain.limits import RunningKey
from headgate._projections import ConcurrencyLimitRow, RateLimitRow
from headgate._store.sql.backends import dialect_of
from headgate._store.sql.predicates import LIVE_PARTITIONED_WHERE, RUNNING_WHERE
from headgate._store.sql.prepared import Prepared
from headgate._store.sql.projector import CHUNK
from headgate._store.sql.schema import LIVE, queue_turns, rate_starts

_jobs, _limits, _rates = LIVE.jobs, LIVE.concurrency_limits, LIVE.rate_limits
_RUNNING: Final = text(RUNNING_WHERE)
RATE_CLASS: Final = bindparam("rate_class", type_=String)
SINCE: Final = bindparam("since", type_=BigInteger)
LAST_KEPT: Final = bindparam("last_kept", type_=Integer)
"""The place of a class's oldest start counted, from 0 (its limit - 1)."""

_LIMIT_ROWS: Final = Prepared(
    select(*(_limits.c[name] for name in ConcurrencyLimitRow.__dataclass_fields__)).order_by(
        _limits.c.scope
    )
)
_RATE_ROWS: Final = Prepared(
    select(*(_rates.c[name] for name in RateLimitRow.__dataclass_fields__)).order_by(
        _rates.c.rate_class
    )
)
_RUNNING_COUNTS: Final = Prepared(
    select(_jobs.c.queue, _jobs.c.kind, _jobs.c.partition_key, func.count())
    .where(_RUNNING)
    .group_by(_jobs.c.queue, _jobs.c.kind, _jobs.c.partition_key)
)
STARTS_SINCE: Final = Prepared(
    select(func.count()).where(
        rate_starts.c.rate_class == RATE_CLASS, rate_starts.c.started_at_ms > SINCE
    )
)
_FILLING_START: Final = Prepared(
    select(rate_starts.c.started_at_ms)
    .where(rate_starts.c.rate_class == RATE_CLASS, rate_starts.c.started_at_ms > SINCE)
    .order_by(rate_starts.c.started_at_ms.desc())
    .limit(1)
    .offset(LAST_KEPT)
)
"""A class's `last_kept + 1`-th newest start within its window: the start that
uses the class up, if it is."""


def concurrency_limits(connection: Connection) -> list[ConcurrencyLimitRow]:
    return [ConcurrencyLimitRow(*row) for row in _LIMIT_ROWS.run(connection)]


def rate_limits(connection: Connection) -> list[RateLimitRow]:
    return [RateLimitRow(*row) for row in _RATE_ROWS.run(connection)]


def running_counts(connection: Connection) -> dict[RunningKey, int]:
    """Running jobs by (queue, kind, partition key): the few a fleet runs at once."""
    return {
        (str(queue), str(kind), partition): int(count)
        for queue, kind, partition, count in _RUNNING_COUNTS.run(connection)
    }


def recent_starts(connection: Connection, now_ms: int) -> dict[str, int]:
    """Per rate class with a limit, its starts within its window (read only)."""
    counts: dict[str, int] = {}
    for row in rate_limits(connection):
        since = now_ms - row.per_ms
        ((count,),) = STARTS_SINCE.run(connection, rate_class=row.rate_class, since=since)
        counts[row.rate_class] = int(count)
    return counts


def rate_slot_frees_at(connection: Connection, now_ms: int) -> int | None:
    """When the first used-up rate class frees a start: its limit-th newest start
    within its window, plus its window (read only)."""
    frees = []
    for row in rate_limits(connection):
        filling = _FILLING_START.run(
            connection,
            rate_class=row.rate_class,
            since=now_ms - row.per_ms,
            last_kept=max(row.max_starts - 1, 0),
        )
        if filling:
            frees.append(int(filling[0][0]) + row.per_ms)
    return min(frees, default=None)


def turns(
    connection: Connection,
    lanes: Collection[Lane],
    partitions: Collection[tuple[str, int, str]],
) -> Turns:
    """The gate's fair-share facts: each lane's current turn (`queue_turns`) and
    the latest live turn of each (queue, priority, partition key) asked about."""
    dialect = dialect_of(connection)
    wanted_lanes = set(lanes)
    current: dict[Lane, int] = {}
    queues = sorted({queue for queue, _ in wanted_lanes})
    for start in range(0, len(queues), CHUNK):
        query = select(queue_turns).where(
            dialect.is_one_of(queue_turns.c.queue, queues[start : start + CHUNK])
        )
        for queue, priority, turn in connection.execute(query):
            if (queue, priority) in wanted_lanes:
                current[(str(queue), int(priority))] = int(turn)
    latest: dict[tuple[str, int, str], int] = {}
    wanted = sorted(set(partitions))
    for start in range(0, len(wanted), CHUNK):
        asked = wanted[start : start + CHUNK]
        query = (
            select(
                _jobs.c.queue, _jobs.c.partition_key, _jobs.c.priority, func.max(_jobs.c.fair_turn)
            )
            .where(
                text(LIVE_PARTITIONED_WHERE),
                dialect.is_one_of(_jobs.c.queue, sorted({queue for queue, _, _ in asked})),
                dialect.is_one_of(_jobs.c.partition_key, sorted({key for _, _, key in asked})),
            )
            .group_by(_jobs.c.queue, _jobs.c.partition_key, _jobs.c.priority)
        )
        chunk = set(asked)
        for queue, key, priority, turn in connection.execute(query):
            if (queue, priority, key) in chunk:
                latest[(str(queue), int(priority), str(key))] = int(turn)
    return Turns(current, latest)
