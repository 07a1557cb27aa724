"""The claim on SQL: what a worker takes, and the flow-control facts it reads.

A claim takes the rows it claims with FOR UPDATE SKIP LOCKED (where the
database has it), so claims beside each other never take one job twice nor
wait for each other's rows. With concurrency limits or rate classes, a claim
holds the store's claim lock (`CLAIMS_KEY`; on SQLite every write holds the
whole log) before it counts, so what it counts (running jobs, a rate class's
recent starts) cannot change before it commits, and a limit it keeps holds
across every process (`limits`). Without limits or rate classes a claim is
one UPDATE per queue of the rows the claim index gives first; with them, it
reads candidates in the same order, skipping what is full, takes those that
fit (`limits.Slots`), and updates them.

The admission gate's fair-share facts (`fair_share.Turns`) are read here
too: they are the claim order's other half, and the claim keeps each lane's
current turn.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    Integer,
    Select,
    String,
    and_,
    bindparam,
    case,
    cast,
    delete,
    exists,
    func,
    insert,
    literal,
    not_,
    null,
    or_,
    select,
    text,
    union_all,
    update,
)
from sqlalchemy.engine import Connection

from headgate._domain.events import JobState
from headgate._domain.fair_share import Lane, Turns, lanes_claimed
from headgate._domain.limits import (
    EACH_PARTITION,
    MAX_RATE_WINDOW_MS,
    ConcurrencyLimit,
    RateLimit,
    RunningKey,
    Slots,
)
from headgate._projections import ConcurrencyLimitRow, JobRow, RateLimitRow
from headgate._store.sql.backends import Dialect, dialect_of
from headgate._store.sql.predicates import (
    CLAIMABLE_WHERE,
    LIVE_PARTITIONED_WHERE,
    RUNNING_WHERE,
    live_ticks_where,
)
from headgate._store.sql.prepared import Prepared
from headgate._store.sql.projector import CHUNK
from headgate._store.sql.schema import LIVE, queue_turns, rate_starts

_jobs, _paused, _blame = LIVE.jobs, LIVE.paused_queues, LIVE.crash_blame
_limits, _rates = LIVE.concurrency_limits, LIVE.rate_limits
_CLAIMABLE: Final = text(CLAIMABLE_WHERE)
_RUNNING: Final = text(RUNNING_WHERE)
_EARLIER: Final = "earlier"
_JOB_ROW_COLUMNS: Final = tuple(_jobs.c[name] for name in JobRow.__dataclass_fields__)
_ANY_BLAME: Final = exists().select_from(_blame).label("any_blame")


def _limits_and_running() -> Prepared:
    """Every concurrency limit, every rate limit and, when any concurrency limit
    exists, the running jobs by (queue, kind, partition key): one statement, so
    a claim on a store without limits pays one read of two empty tables, and a
    claim under limits needs nothing more before it takes its jobs."""
    number = BigInteger()
    what = "what"
    limits = select(
        literal("limit").label(what),
        _limits.c.scope,
        _limits.c.queue,
        _limits.c.kind,
        _limits.c.partition_key,
        cast(_limits.c.max_running, number),
        _limits.c.set_at_ms,
        cast(null(), number),
    )
    rates = select(
        literal("rate"),
        _rates.c.rate_class,
        cast(null(), String),
        cast(null(), String),
        cast(null(), String),
        cast(_rates.c.max_starts, number),
        _rates.c.set_at_ms,
        _rates.c.per_ms,
    )
    running = (
        select(
            literal("running"),
            cast(null(), String),
            _jobs.c.queue,
            _jobs.c.kind,
            _jobs.c.partition_key,
            cast(func.count(), number),
            cast(null(), number),
            cast(null(), number),
        )
        .where(_RUNNING, exists().select_from(_limits))
        .group_by(_jobs.c.queue, _jobs.c.kind, _jobs.c.partition_key)
    )
    return Prepared(union_all(limits, rates, running))


_LIMITS_AND_RUNNING: Final = _limits_and_running()
_LIMITED_LATELY: Final = "headgate_limited_lately"
"""Whether this connection's last claim found limits or rate classes (its
`info`): a hint only, choosing which claim to try first. Without any, the
claim is one statement that proves there are none (`unless_limited`); with
them, the limits are read first, as that statement would take nothing."""
MAX_ROUNDS: Final = 32
"""A limited claim reads candidates in windows; each round either fills the
claim or finds another scope full, so few rounds are ever needed."""


CLAIMS_KEY: Final = "claims"
"""The key a claim holds while it counts against limits and rate classes."""


def claim(  # noqa: PLR0917 (the claim values, and how to hold a key)
    connection: Connection,
    capacity: Mapping[str, int],
    timeouts_ms: Mapping[str, int],
    worker_id: str,
    now_ms: int,
    hold: Callable[[Collection[str]], None],
) -> tuple[list[JobRow], bool]:
    """Claim due pending jobs of these kinds (see JobQueue.claim), per queue.
    With them, whether any fingerprint carries crash blame (read in the same
    statement: nearly always none, and then the claim needs no blame lookup).
    `hold` holds keys until the transaction ends (`LogOrder.lock`)."""
    if not timeouts_ms:
        return [], True
    dialect = dialect_of(connection)
    statement = _claim_statement(dialect, timeouts_ms)
    claimed: list[JobRow] = []
    blame_seen = False
    slots: Slots | None = None
    slots_read = False
    for queue, count in capacity.items():
        if count <= 0:
            continue
        if not slots_read:
            tried = not connection.info.get(_LIMITED_LATELY)
            rows: list[JobRow] = []
            blamed = False
            if tried:
                unlimited = _claim_statement(dialect, timeouts_ms, unless_limited=True)
                rows, blamed = _claim_first(
                    unlimited,
                    connection,
                    queue=queue,
                    count=count,
                    worker_id=worker_id,
                    now_ms=now_ms,
                )
            slots_read = True
            if not rows:  # limits to keep, or nothing due: which, the read says
                hold([CLAIMS_KEY])  # before counting: no other claim counts meanwhile
                slots = _slots(connection, now_ms)
                connection.info[_LIMITED_LATELY] = slots is not None
            if rows or (tried and slots is None):  # the unlimited claim's answer stands
                blame_seen = blame_seen or blamed
                claimed.extend(sorted(rows, key=claim_order))
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
    _record_turns(connection, claimed)
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


_CLAIMS: dict[tuple[int, tuple[tuple[str, int], ...], bool], Prepared] = {}
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


def _claim_statement(
    dialect: Dialect, timeouts_ms: Mapping[str, int], *, unless_limited: bool = False
) -> Prepared:
    """The claim for these kinds and their timeouts: built once (a worker's handlers
    rarely change), its queue, limit, time and worker bound at each run.
    `unless_limited`: it claims nothing while any concurrency limit or rate
    class exists (a claim that takes rows so has proved there is none to read)."""
    key = (id(dialect), tuple(sorted(timeouts_ms.items())), unless_limited)
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
    due = dialect.locked_skipping(due)
    if unless_limited:
        due = due.where(~exists().select_from(_limits), ~exists().select_from(_rates))
    built = _claimed(_jobs.c.job_id.in_(due.scalar_subquery()), dict(key[1]))
    with _CLAIMS_LOCK:
        return _CLAIMS.setdefault(key, Prepared(built))


def takes_its_turn() -> ColumnElement[bool]:
    """A job that is not serial, or a serial one no earlier tick job of whose
    schedule is pending or running (`overlap.is_serial`). An earlier tick job
    is live until its end commits, so a claim beside this one that takes it
    leaves it live here too."""
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
_RATE_CLASS = bindparam("rate_class", type_=String)
_SINCE = bindparam("since", type_=BigInteger)
_LAST_KEPT = bindparam("last_kept", type_=Integer)
_OLDEST_KEPT: Final = (
    select(rate_starts.c.started_at_ms)
    .where(rate_starts.c.rate_class == _RATE_CLASS)
    .order_by(rate_starts.c.started_at_ms.desc())
    .limit(1)
    .offset(_LAST_KEPT)
    .scalar_subquery()
)
_WINDOW_SINCE = bindparam("window_since", type_=BigInteger)
_FORGET_STARTS: Final = Prepared(
    delete(rate_starts).where(
        rate_starts.c.rate_class == _RATE_CLASS,
        or_(
            rate_starts.c.started_at_ms <= _SINCE,
            and_(
                rate_starts.c.started_at_ms <= _WINDOW_SINCE,
                rate_starts.c.started_at_ms < _OLDEST_KEPT,
            ),
        ),
    )
)
"""Forget the starts of a class no window can count: older than the widest
window a class may have (a day), or both outside its window and behind its
newest `limit`. Every start inside its window is kept, so a limit lowered and
raised again within it still counts them; outside it, the newest `limit` are
kept, so a widened window still counts what started before it was widened.
What is kept stays bounded: inside the window, no more than the limits in
force let start. `last_kept` is the oldest kept start's place, from 0."""
_STARTS_SINCE: Final = Prepared(
    select(func.count()).where(
        rate_starts.c.rate_class == _RATE_CLASS, rate_starts.c.started_at_ms > _SINCE
    )
)
_FILLING_START: Final = Prepared(
    select(rate_starts.c.started_at_ms)
    .where(rate_starts.c.rate_class == _RATE_CLASS, rate_starts.c.started_at_ms > _SINCE)
    .order_by(rate_starts.c.started_at_ms.desc())
    .limit(1)
    .offset(_LAST_KEPT)
)
"""A class's `last_kept + 1`-th newest start within its window: the start that
uses the class up, if it is."""
_RECORD_START: Final = Prepared(
    insert(rate_starts).values(
        rate_class=_RATE_CLASS,
        started_at_ms=bindparam("now", type_=BigInteger),
        job_id=bindparam("job_id", type_=String),
    )
)


def _slots(connection: Connection, now_ms: int) -> Slots | None:
    """The limits as they stand in this transaction, or None when there are none."""
    limits: list[ConcurrencyLimit] = []
    rates: dict[str, RateLimit] = {}
    running: dict[RunningKey, int] = {}
    for what, name, queue, kind, partition, number, _, per_ms in _LIMITS_AND_RUNNING.run(
        connection
    ):
        if what == "limit":
            limits.append(ConcurrencyLimit(queue, kind, partition, int(number)))
        elif what == "rate":
            rates[name] = RateLimit(name, int(number), int(per_ms))
        else:
            running[(queue, kind, partition)] = int(number)
    if not limits and not rates:
        return None
    started: dict[str, int] = {}
    for name, rate in rates.items():
        forget_before = now_ms - MAX_RATE_WINDOW_MS
        since = now_ms - rate.per_ms
        _FORGET_STARTS.run(
            connection,
            rate_class=name,
            since=forget_before,
            window_since=since,
            last_kept=rate.limit - 1,
        )
        ((count,),) = _STARTS_SINCE.run(connection, rate_class=name, since=since)
        started[name] = int(count)
    return Slots.counted(limits, rates, running, started)


class _Candidate(NamedTuple):
    """What a limited claim reads of a job before it takes it."""

    job_id: str
    queue: str
    kind: str
    partition_key: str | None
    rate_class: str | None


_CANDIDATE_COLUMNS: Final = tuple(_jobs.c[name] for name in _Candidate._fields)
_CANDIDATES: dict[tuple[int, tuple[str, ...]], Prepared] = {}
_BY_IDS: dict[tuple[int, tuple[tuple[str, int], ...]], Prepared] = {}


def _candidates(dialect: Dialect, kinds: Sequence[str]) -> Prepared:
    """Due jobs of these kinds in claim order, leaving out what `Exclusions` holds
    full (all bound at each run but its pairs, which are rare and added anew)."""
    key = (id(dialect), tuple(sorted(kinds)))
    statement = _CANDIDATES.get(key)
    if statement is not None:
        return statement
    queue = bindparam("queue", type_=String)
    partition, rate_class = _jobs.c.partition_key, _jobs.c.rate_class
    built = (
        select(*_CANDIDATE_COLUMNS)
        .where(
            *_due(dialect, queue, bindparam("now", type_=BigInteger), key[1]),
            ~dialect.is_one_of_bound("full_kinds", _jobs.c.kind),
            or_(partition.is_(None), ~dialect.is_one_of_bound("full_partitions", partition)),
            or_(partition.is_(None), ~bindparam("keyed_full", type_=Boolean)),
            or_(rate_class.is_(None), ~dialect.is_one_of_bound("used_up", rate_class)),
            ~dialect.is_one_of_bound("seen", _jobs.c.job_id),
        )
        .order_by(*_ORDER)
        .limit(bindparam("window", type_=Integer))
    )
    built = dialect.locked_skipping(built)
    with _CLAIMS_LOCK:
        return _CANDIDATES.setdefault(key, Prepared(built))


def _by_ids(dialect: Dialect, timeouts_ms: Mapping[str, int]) -> Prepared:
    """The claim of the jobs `ids`, just read pending in this transaction (and
    locked by that read: nothing changed them since), each found by its primary
    key. Their state is not asked again: with the claim index's predicate in
    the statement, PostgreSQL read that whole index for a few ids while its
    statistics lagged a growing table."""
    key = (id(dialect), tuple(sorted(timeouts_ms.items())))
    statement = _BY_IDS.get(key)
    if statement is None:
        built = _claimed(dialect.is_one_of_bound("ids", _jobs.c.job_id), dict(key[1]))
        with _CLAIMS_LOCK:
            statement = _BY_IDS.setdefault(key, Prepared(built))
    return statement


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
    room = slots.room(queue, timeouts_ms)
    if room is not None:  # the limits hold every candidate alike: the plain claim, fewer
        if room <= 0:
            return [], False
        statement = _claim_statement(dialect, timeouts_ms)
        rows, blamed = _claim_first(
            statement,
            connection,
            queue=queue,
            count=min(count, room),
            worker_id=worker_id,
            now_ms=now_ms,
        )
        for row in rows:
            slots.count(row.queue, row.kind, row.partition_key)
        return rows, blamed
    chosen = _choose(connection, dialect, queue, count, list(timeouts_ms), now_ms, slots)
    if not chosen:
        return [], False
    claimed: list[JobRow] = []
    blamed = False
    ids = dialect.batch_value([row.job_id for row in chosen])
    for values in _by_ids(dialect, timeouts_ms).run(
        connection, ids=ids, now=now_ms, worker=worker_id
    ):
        claimed.append(JobRow(*values[:-1]))
        blamed = blamed or bool(values[-1])
    for row in claimed:
        if row.rate_class is not None and row.rate_class in slots.rates:
            _RECORD_START.run(connection, rate_class=row.rate_class, now=now_ms, job_id=row.job_id)
    return claimed, blamed


def _choose(  # noqa: PLR0917 (the claim's own values, passed on)
    connection: Connection,
    dialect: Dialect,
    queue: str,
    count: int,
    kinds: list[str],
    now_ms: int,
    slots: Slots,
) -> list[_Candidate]:
    """The candidates a claim takes, in claim order: read a window at a time,
    each taken if it fits (`Slots.take`), the full scopes left out of the next."""
    chosen: list[_Candidate] = []
    seen: list[str] = []
    for _ in range(MAX_ROUNDS):
        room = count - len(chosen)
        exclusions = slots.exclusions(queue)
        if room <= 0 or exclusions.whole_queue:
            break
        window = room * 2 + 8
        values = {
            "queue": queue,
            "now": now_ms,
            "window": window,
            "full_kinds": dialect.batch_value(sorted(exclusions.kinds)),
            "full_partitions": dialect.batch_value(sorted(exclusions.partitions)),
            "keyed_full": exclusions.keyed,
            "used_up": dialect.batch_value(sorted(exclusions.rate_classes)),
            "seen": dialect.batch_value(seen),
        }
        if exclusions.pairs:
            built = _candidates(dialect, kinds).statement
            assert isinstance(built, Select)
            query = built.where(*_excluded(exclusions.pairs))
            rows = [_Candidate(*row) for row in connection.execute(query, values)]
        else:
            found = _candidates(dialect, kinds).run(connection, **values)
            rows = [_Candidate(*row) for row in found]
        for row in rows:
            seen.append(row.job_id)
            if len(chosen) < count and slots.take(
                row.queue, row.kind, row.partition_key, row.rate_class
            ):
                chosen.append(row)
        if len(rows) < window:
            break
    return chosen


def _excluded(pairs: Iterable[tuple[str, str]]) -> list[ColumnElement[bool]]:
    """Leave out each (kind, partition key) pair; the key EACH_PARTITION is any key."""
    conditions: list[ColumnElement[bool]] = []
    for kind, partition in sorted(pairs):
        keyed = (
            _jobs.c.partition_key.is_not(None)
            if partition == EACH_PARTITION
            else func.coalesce(_jobs.c.partition_key, "") == partition
        )
        conditions.append(not_(and_(_jobs.c.kind == kind, keyed)))
    return conditions


# What the limits stand at ---------------------------------------------------


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
        ((count,),) = _STARTS_SINCE.run(connection, rate_class=row.rate_class, since=since)
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


def _record_turns(connection: Connection, claimed: Sequence[JobRow]) -> None:
    """Raise each lane's current turn to the highest its claim took (`fair_share`)."""
    highest = lanes_claimed([(row.queue, row.priority, row.fair_turn) for row in claimed])
    if not highest:
        return
    statement = dialect_of(connection).raise_to(queue_turns, ("queue", "priority"), "turn")
    connection.execute(
        statement,
        [
            {"queue": queue, "priority": priority, "turn": turn}
            for (queue, priority), turn in sorted(highest.items())
        ],
    )
