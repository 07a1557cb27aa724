"""The claim on SQL: what a worker takes, and the flow-control facts it reads.

A claim runs in a write transaction, holding the log head, so no other claim
on the store runs beside it: what it counts (running jobs, a rate class's
recent starts) cannot change before it commits, and a limit it keeps holds
across every process (`limits`). Without limits or rate classes a claim is
one UPDATE per queue of the rows the claim index gives first; with them, it
reads candidates in the same order, skipping what is full, takes those that
fit (`limits.Slots`), and updates them.

The admission gate's fair-share facts (`fair_share.Turns`) are read here
too: they are the claim order's other half.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Final

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Integer,
    String,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    insert,
    literal,
    not_,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection

from headgate._domain.events import JobState
from headgate._domain.fair_share import Turns
from headgate._domain.limits import EACH_PARTITION, Exclusions, RunningKey, Slots
from headgate._projections import ConcurrencyLimitRow, JobRow, RateLimitRow
from headgate._store.sql.backends import Dialect, dialect_of
from headgate._store.sql.prepared import Prepared
from headgate._store.sql.projector import CHUNK
from headgate._store.sql.schema import (
    CLAIMABLE_WHERE,
    LIVE,
    LIVE_PARTITIONED_WHERE,
    PENDING_PARTITIONED_WHERE,
    RUNNING_WHERE,
    live_ticks_where,
    rate_starts,
)

_jobs, _paused, _blame = LIVE.jobs, LIVE.paused_queues, LIVE.crash_blame
_limits, _rates = LIVE.concurrency_limits, LIVE.rate_limits
_CLAIMABLE: Final = text(CLAIMABLE_WHERE)
_RUNNING: Final = text(RUNNING_WHERE)
_EARLIER: Final = "earlier"
_JOB_ROW_COLUMNS: Final = tuple(_jobs.c[name] for name in JobRow.__dataclass_fields__)
_ANY_BLAME: Final = exists().select_from(_blame).label("any_blame")
_ANY_LIMITS: Final = Prepared(
    select(
        exists().select_from(_limits).label("limits"),
        exists().select_from(_rates).label("rates"),
    )
)
"""Whether any concurrency or rate limit exists: one read per claim, and nearly
always the only one flow control costs."""
MAX_ROUNDS: Final = 32
"""A limited claim reads candidates in windows; each round either fills the
claim or finds another scope full, so few rounds are ever needed."""


def claim(
    connection: Connection,
    capacity: Mapping[str, int],
    timeouts_ms: Mapping[str, int],
    worker_id: str,
    now_ms: int,
) -> tuple[list[JobRow], bool]:
    """Claim due pending jobs of these kinds (see JobQueue.claim), per queue.
    With them, whether any fingerprint carries crash blame (read in the same
    statement: nearly always none, and then the claim needs no blame lookup)."""
    if not timeouts_ms:
        return [], True
    slots = _slots(connection, now_ms)
    statement = _claim_statement(dialect_of(connection), timeouts_ms)
    claimed: list[JobRow] = []
    blame_seen = False
    for queue, count in capacity.items():
        if count <= 0:
            continue
        if slots is not None and slots.applies_to(queue, timeouts_ms):
            rows, blamed = _claim_within_limits(
                connection,
                queue=queue,
                count=count,
                timeouts_ms=timeouts_ms,
                worker_id=worker_id,
                now_ms=now_ms,
                slots=slots,
            )
        else:
            rows, blamed = _claim_first(
                statement, connection, queue=queue, count=count, worker_id=worker_id, now_ms=now_ms
            )
        blame_seen = blame_seen or blamed
        claimed.extend(sorted(rows, key=claim_order))
    return claimed, blame_seen or not claimed


def _claim_first(
    statement: Prepared,
    connection: Connection,
    *,
    queue: str,
    count: int,
    worker_id: str,
    now_ms: int,
) -> tuple[list[JobRow], bool]:
    rows: list[JobRow] = []
    blamed = False
    for row in statement.run(connection, queue=queue, limit=count, now=now_ms, worker=worker_id):
        rows.append(JobRow(*row[:-1]))
        blamed = blamed or bool(row[-1])
    return rows, blamed


def claim_order(row: JobRow) -> tuple[int, int, int, str]:
    return -row.priority, row.fair_turn, row.run_at_ms, row.job_id


_CLAIMS: dict[tuple[int, tuple[tuple[str, int], ...]], Prepared] = {}
_CLAIMS_LOCK = threading.Lock()


def _due(dialect: Dialect, queue: Any, now: Any, kinds: Sequence[str]) -> list[ColumnElement[bool]]:
    """What makes a job claimable in `queue` at `now`: pending, due, of these
    kinds, its queue not paused, and its turn come if it is serial."""
    return [
        _CLAIMABLE,
        _jobs.c.queue == queue,
        _jobs.c.run_at_ms <= now,
        dialect.is_one_of(_jobs.c.kind, list(kinds)),
        ~exists().where(_paused.c.queue == queue),
        takes_its_turn(),
    ]


_ORDER: Final = (_jobs.c.priority.desc(), _jobs.c.fair_turn, _jobs.c.run_at_ms, _jobs.c.job_id)
"""The claim order, the claim index's own."""


def _claimed(where: ColumnElement[bool], timeouts: Mapping[str, int]) -> Any:
    """The UPDATE that makes the rows `where` picks running, returning them."""
    now = bindparam("now", type_=BigInteger)
    kind_timeout = case(dict(timeouts), value=_jobs.c.kind)
    return (
        update(_jobs)
        .where(where)
        .values(
            state=JobState.RUNNING.value,
            worker_id=bindparam("worker", type_=String),
            deadline_ms=now + func.coalesce(_jobs.c.timeout_ms, kind_timeout),
            updated_at_ms=now,
        )
        .returning(*_JOB_ROW_COLUMNS, _ANY_BLAME)
    )


def _claim_statement(dialect: Dialect, timeouts_ms: Mapping[str, int]) -> Prepared:
    """The claim for these kinds and their timeouts: built once (a worker's handlers
    rarely change), its queue, limit, time and worker bound at each run."""
    key = (id(dialect), tuple(sorted(timeouts_ms.items())))
    statement = _CLAIMS.get(key)
    if statement is not None:
        return statement
    now = bindparam("now", type_=BigInteger)
    queue = bindparam("queue", type_=String)
    due = (
        select(_jobs.c.job_id)
        .where(*_due(dialect, queue, now, [kind for kind, _ in key[1]]))
        .order_by(*_ORDER)
        .limit(bindparam("limit", type_=Integer))
    )
    built = _claimed(_jobs.c.job_id.in_(due.scalar_subquery()), dict(key[1]))
    with _CLAIMS_LOCK:
        return _CLAIMS.setdefault(key, Prepared(built))


def takes_its_turn() -> ColumnElement[bool]:
    """A job that is not serial, or a serial one no earlier tick job of whose
    schedule is pending or running (`overlap.is_serial`). Claims are made holding
    the log head, so no other claim can start one meanwhile."""
    earlier = _jobs.alias(_EARLIER)
    return or_(
        _jobs.c.serial.is_(False),
        ~exists().where(
            text(live_ticks_where(_EARLIER)),
            earlier.c.periodic_schedule_id == _jobs.c.periodic_schedule_id,
            earlier.c.periodic_tick_ms < _jobs.c.periodic_tick_ms,
        ),
    )


# Within limits ---------------------------------------------------------------


def _slots(connection: Connection, now_ms: int) -> Slots | None:
    """The limits as they stand in this transaction, or None when there are none."""
    ((any_limits, any_rates),) = _ANY_LIMITS.run(connection)
    if not any_limits and not any_rates:
        return None
    limits = [row.limit() for row in concurrency_limits(connection)]
    rates = {row.rate_class: row.limit() for row in rate_limits(connection)}
    started = _recent_starts(connection, rates, now_ms) if rates else {}
    running = running_counts(connection) if limits else {}
    return Slots.counted(limits, rates, running, started)


def _recent_starts(connection: Connection, rates: Mapping[str, Any], now_ms: int) -> dict[str, int]:
    """Per rate class, its starts within its window; the older ones are dropped."""
    started: dict[str, int] = {}
    for name, rate in rates.items():
        since = now_ms - rate.per_ms
        connection.execute(
            delete(rate_starts).where(
                rate_starts.c.rate_class == name, rate_starts.c.started_at_ms <= since
            )
        )
        count = connection.execute(
            select(func.count()).where(rate_starts.c.rate_class == name)
        ).scalar_one()
        started[name] = int(count)
    return started


def _claim_within_limits(
    connection: Connection,
    *,
    queue: str,
    count: int,
    timeouts_ms: Mapping[str, int],
    worker_id: str,
    now_ms: int,
    slots: Slots,
) -> tuple[list[JobRow], bool]:
    dialect = dialect_of(connection)
    kinds = list(timeouts_ms)
    chosen: list[JobRow] = []
    seen: list[str] = []
    for _ in range(MAX_ROUNDS):
        room = count - len(chosen)
        exclusions = slots.exclusions(queue)
        if room <= 0 or exclusions.whole_queue:
            break
        window = room * 2 + 8
        query = (
            select(*_JOB_ROW_COLUMNS)
            .where(
                *_due(dialect, literal(queue), literal(now_ms), kinds),
                *_excluded(exclusions),
                *([not_(dialect.is_one_of(_jobs.c.job_id, seen))] if seen else []),
            )
            .order_by(*_ORDER)
            .limit(window)
        )
        rows = [JobRow(*row) for row in connection.execute(query)]
        for row in rows:
            seen.append(row.job_id)
            if len(chosen) < count and slots.take(
                row.queue, row.kind, row.partition_key, row.rate_class
            ):
                chosen.append(row)
        if len(rows) < window:
            break
    if not chosen:
        return [], False
    ids = [row.job_id for row in chosen]
    statement = _claimed(
        and_(dialect.is_one_of(_jobs.c.job_id, ids), _CLAIMABLE),
        timeouts_ms,
    )
    claimed: list[JobRow] = []
    blamed = False
    for values in connection.execute(statement, {"now": now_ms, "worker": worker_id}):
        claimed.append(JobRow(*values[:-1]))
        blamed = blamed or bool(values[-1])
    _record_starts(connection, claimed, slots, now_ms)
    return claimed, blamed


def _excluded(exclusions: Exclusions) -> list[ColumnElement[bool]]:
    """The conditions that leave out what is full: a (kind, partition) pair each
    (None: any; EACH_PARTITION: any key), and the used-up rate classes."""
    conditions: list[ColumnElement[bool]] = []
    for kind, partition in exclusions.pairs:
        terms: list[ColumnElement[bool]] = []
        if kind is not None:
            terms.append(_jobs.c.kind == kind)
        if partition == EACH_PARTITION:
            terms.append(_jobs.c.partition_key.is_not(None))
        elif partition is not None:
            terms.append(func.coalesce(_jobs.c.partition_key, "") == partition)
        if terms:
            conditions.append(not_(and_(*terms)))
    if exclusions.rate_classes:
        conditions.append(
            or_(
                _jobs.c.rate_class.is_(None),
                _jobs.c.rate_class.not_in(sorted(exclusions.rate_classes)),
            )
        )
    return conditions


def _record_starts(
    connection: Connection, claimed: Iterable[JobRow], slots: Slots, now_ms: int
) -> None:
    rows = [
        {"rate_class": row.rate_class, "started_at_ms": now_ms, "job_id": row.job_id}
        for row in claimed
        if row.rate_class is not None and row.rate_class in slots.rates
    ]
    if rows:
        connection.execute(insert(rate_starts), rows)


# What the limits stand at ---------------------------------------------------


def concurrency_limits(connection: Connection) -> list[ConcurrencyLimitRow]:
    query = select(*(_limits.c[name] for name in ConcurrencyLimitRow.__dataclass_fields__))
    return [
        ConcurrencyLimitRow(*row) for row in connection.execute(query.order_by(_limits.c.scope))
    ]


def rate_limits(connection: Connection) -> list[RateLimitRow]:
    query = select(*(_rates.c[name] for name in RateLimitRow.__dataclass_fields__))
    return [RateLimitRow(*row) for row in connection.execute(query.order_by(_rates.c.rate_class))]


def running_counts(connection: Connection) -> dict[RunningKey, int]:
    """Running jobs by (queue, kind, partition key): the few a fleet runs at once."""
    query = (
        select(_jobs.c.queue, _jobs.c.kind, _jobs.c.partition_key, func.count())
        .where(_RUNNING)
        .group_by(_jobs.c.queue, _jobs.c.kind, _jobs.c.partition_key)
    )
    return {
        (str(queue), str(kind), partition): int(count)
        for queue, kind, partition, count in connection.execute(query)
    }


def recent_starts(connection: Connection, now_ms: int) -> dict[str, int]:
    """Per rate class with a limit, its starts within its window (read only)."""
    counts: dict[str, int] = {}
    for row in rate_limits(connection):
        query = select(func.count()).where(
            rate_starts.c.rate_class == row.rate_class,
            rate_starts.c.started_at_ms > now_ms - row.per_ms,
        )
        counts[row.rate_class] = int(connection.execute(query).scalar_one())
    return counts


def turns(
    connection: Connection,
    queues: Collection[str],
    partitions: Collection[tuple[str, str]],
    now_ms: int,
) -> Turns:
    """The gate's fair-share facts: each queue's current turn (its lowest due
    pending partitioned turn, else 0) and the latest live turn of each
    (queue, partition key) asked about."""
    current: dict[str, int] = {}
    for queue in dict.fromkeys(queues):
        query = (
            select(_jobs.c.fair_turn)
            .where(
                text(PENDING_PARTITIONED_WHERE), _jobs.c.queue == queue, _jobs.c.run_at_ms <= now_ms
            )
            .order_by(_jobs.c.fair_turn)
            .limit(1)
        )
        found = connection.execute(query).scalar()
        current[queue] = 0 if found is None else int(found)
    latest: dict[tuple[str, str], int] = {}
    wanted = sorted(set(partitions))
    dialect = dialect_of(connection)
    for start in range(0, len(wanted), CHUNK):
        chunk = wanted[start : start + CHUNK]
        query = (
            select(_jobs.c.queue, _jobs.c.partition_key, func.max(_jobs.c.fair_turn))
            .where(
                text(LIVE_PARTITIONED_WHERE),
                dialect.is_one_of(_jobs.c.queue, sorted({queue for queue, _ in chunk})),
                dialect.is_one_of(_jobs.c.partition_key, sorted({key for _, key in chunk})),
            )
            .group_by(_jobs.c.queue, _jobs.c.partition_key)
        )
        asked = set(chunk)
        for queue, key, turn in connection.execute(query):
            if (queue, key) in asked:
                latest[(str(queue), str(key))] = int(turn)
    return Turns(current, latest)
