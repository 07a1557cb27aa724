"""Queries over the memory store's read models, written once for committed state
(`Reads`) and for a write transaction's view of it.

Each answers exactly what its port method promises (order, bounds, paging,
ids no store could hold simply absent); none needs to be fast beyond what
tests and one process's embedded use ask of it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

from headgate._domain import claim_policy
from headgate._domain.admission import check_limit, could_be_stored
from headgate._domain.cursors import (
    HISTORY_CURSOR,
    JOBS_CURSOR,
    MAX_PAGE,
    QUARANTINE_CURSOR,
    RUNS_CURSOR,
    SCHEDULES_CURSOR,
    decode_cursor,
    decode_timed_cursor,
    encode_cursor,
    encode_timed_cursor,
)
from headgate._domain.decisions import LiveTickJob
from headgate._domain.events import JobState
from headgate._domain.fair_share import Lane, Turns
from headgate._domain.limits import RateLimit, RunningKey, Slots
from headgate._domain.schedule_health import RECENT_RUNS, HealthState, health_of
from headgate._projections import (
    ConcurrencyLimitRow,
    CrashBlameRow,
    EnqueueEventRow,
    JobAttemptRow,
    JobRow,
    PausedQueueRow,
    QuarantineRow,
    RateLimitRow,
    ScheduleRow,
    ScheduleRunRow,
)
from headgate._projections.enqueue_history import KEEP_PER_SCHEDULE
from headgate._projections.schedule_runs import KEEP_PER_SCHEDULE as RUNS_KEPT
from headgate._store.memory.schema import (
    DUE,
    LIVE_TICKS_OF,
    LIVE_UNIQUE_KEY,
    OF_JOB,
    OF_SCHEDULE,
    PENDING_IN,
    RUNNING_ON,
    RUNS_OF,
    TICK_ORIGIN,
    UNFINISHED_IN,
)
from headgate._store.memory.tables import Rows
from headgate._store.port import STATE_COUNT_CAP, HealthFilter, JobFilter, Page, RunRead

T = TypeVar("T")


@dataclass(frozen=True)
class ReadModels:
    """The projections' rows, committed or as a transaction sees them."""

    schedules: Rows[ScheduleRow]
    jobs: Rows[JobRow]
    enqueue_history: Rows[EnqueueEventRow]
    quarantine: Rows[QuarantineRow]
    job_attempts: Rows[JobAttemptRow]
    crash_blame: Rows[CrashBlameRow]
    paused_queues: Rows[PausedQueueRow]
    concurrency_limits: Rows[ConcurrencyLimitRow]
    rate_limits: Rows[RateLimitRow]
    schedule_runs: Rows[ScheduleRunRow]

    @classmethod
    def of(cls, tables: Mapping[str, Rows[Any]]) -> ReadModels:
        return cls(
            schedules=tables["schedules"],
            jobs=tables["jobs"],
            enqueue_history=tables["enqueue_history"],
            quarantine=tables["quarantine"],
            job_attempts=tables["job_attempts"],
            crash_blame=tables["crash_blame"],
            paused_queues=tables["paused_queues"],
            concurrency_limits=tables["concurrency_limits"],
            rate_limits=tables["rate_limits"],
            schedule_runs=tables["schedule_runs"],
        )


def _rows(table: Rows[T], keys: Iterable[Hashable]) -> list[T]:
    found = (table.get(key) for key in keys)
    return [row for row in found if row is not None]


def _by_run_at(row: JobRow) -> tuple[int, str]:
    return row.run_at_ms, row.job_id


# Schedules


def schedule(models: ReadModels, schedule_id: str) -> ScheduleRow | None:
    return models.schedules.get(schedule_id) if could_be_stored(schedule_id) else None


def schedules(models: ReadModels, schedule_ids: Iterable[str]) -> dict[str, ScheduleRow]:
    wanted = [key for key in dict.fromkeys(schedule_ids) if could_be_stored(key)]
    return {row.schedule_id: row for row in _rows(models.schedules, wanted)}


def _listed(
    models: ReadModels, search: str | None, health: HealthFilter | None = None
) -> list[ScheduleRow]:
    """Live schedules whose id starts with `search` (in `health`'s state), in code
    point order (a str's own order in Python); a search no id could hold
    matches nothing."""
    if search and not could_be_stored(search):
        return []
    prefix = search or ""
    listed = sorted(
        (
            row
            for _, row in models.schedules.items()
            if not row.deleted and row.schedule_id.startswith(prefix)
        ),
        key=lambda row: row.schedule_id,
    )
    if health is None:
        return listed
    return [row for row in listed if _health(models, row, health) is health.state]


def _health(models: ReadModels, row: ScheduleRow, health: HealthFilter) -> HealthState:
    runs = recent_runs(models, [row.schedule_id], RECENT_RUNS).get(row.schedule_id, [])
    return health_of(
        [read.facts() for read in runs],
        paused=row.paused,
        due_at_ms=None if row.finished else row.due_at_ms,
        now_ms=health.now_ms,
        grace_ms=health.grace_ms,
    ).state


def schedule_runs(
    models: ReadModels, schedule_id: str, limit: int, cursor: str | None
) -> Page[RunRead]:
    """Newest first, the newest 100 only (older rows wait for compaction)."""
    check_limit(limit, RUNS_KEPT)
    if not could_be_stored(schedule_id):
        return Page([], None)
    before = None if cursor is None else int(decode_cursor(RUNS_CURSOR, cursor, int))
    shown = _newest_runs(models, schedule_id)[:RUNS_KEPT]
    items = [_run_read(models, run) for run in shown if before is None or run.position < before]
    return _page(items, limit, lambda last: encode_cursor(RUNS_CURSOR, last.run.position))


def recent_runs(
    models: ReadModels, schedule_ids: Iterable[str], per_schedule: int
) -> dict[str, list[RunRead]]:
    check_limit(per_schedule, RUNS_KEPT)
    found: dict[str, list[RunRead]] = {}
    for schedule_id in dict.fromkeys(schedule_ids):
        if not could_be_stored(schedule_id):
            continue
        newest = _newest_runs(models, schedule_id)[:per_schedule]
        if newest:
            found[schedule_id] = [_run_read(models, run) for run in newest]
    return found


def _newest_runs(models: ReadModels, schedule_id: str) -> list[ScheduleRunRow]:
    runs = _rows(models.schedule_runs, models.schedule_runs.keys_where(RUNS_OF, schedule_id))
    return sorted(runs, key=lambda run: run.position, reverse=True)


def _run_read(models: ReadModels, run: ScheduleRunRow) -> RunRead:
    job = models.jobs.get(run.job_id)
    return RunRead(run, None if job is None else job.state)


def schedules_page(
    models: ReadModels,
    limit: int,
    cursor: str | None,
    search: str | None = None,
    health: HealthFilter | None = None,
) -> Page[ScheduleRow]:
    check_limit(limit, MAX_PAGE)
    after = None if cursor is None else str(decode_cursor(SCHEDULES_CURSOR, cursor, str))
    listed = _listed(models, search, health)
    items = [row for row in listed if after is None or row.schedule_id > after]
    return _page(items, limit, lambda last: encode_cursor(SCHEDULES_CURSOR, last.schedule_id))


def schedule_count(
    models: ReadModels, search: str | None = None, health: HealthFilter | None = None
) -> int:
    return len(_listed(models, search, health))


def spec_counts(models: ReadModels, excluding: Collection[str] = ()) -> dict[str, int]:
    left_out = set(excluding)
    counts: dict[str, int] = {}
    for schedule_id, row in models.schedules.items():
        if not row.deleted and not row.finished and schedule_id not in left_out:
            counts[row.spec] = counts.get(row.spec, 0) + 1
    return counts


def declared_schedules(models: ReadModels, declared_by: str) -> list[ScheduleRow]:
    return [
        row
        for _, row in models.schedules.items()
        if not row.deleted and row.declared_by == declared_by
    ]


def undeclared_count(models: ReadModels) -> int:
    return sum(
        1
        for _, row in models.schedules.items()
        if not row.deleted and row.undeclared_at_ms is not None
    )


def _due(models: ReadModels) -> list[ScheduleRow]:
    return _rows(models.schedules, models.schedules.keys_where(DUE, True))


def due_schedules(models: ReadModels, now_ms: int, limit: int) -> list[ScheduleRow]:
    due = [row for row in _due(models) if row.due_at_ms <= now_ms]
    return sorted(due, key=lambda row: (row.due_at_ms, row.schedule_id))[:limit]


def earliest_due_at(models: ReadModels) -> int | None:
    return min((row.due_at_ms for row in _due(models)), default=None)


def due_count(models: ReadModels, now_ms: int) -> int:
    return sum(1 for row in _due(models) if row.due_at_ms <= now_ms)


def enqueue_history(
    models: ReadModels, schedule_id: str, limit: int, cursor: str | None
) -> Page[EnqueueEventRow]:
    """Newest first, the newest 100 only (older rows wait for compaction)."""
    check_limit(limit, KEEP_PER_SCHEDULE)
    if not could_be_stored(schedule_id):
        return Page([], None)
    before = None if cursor is None else int(decode_cursor(HISTORY_CURSOR, cursor, int))
    keys = models.enqueue_history.keys_where(OF_SCHEDULE, schedule_id)
    shown = sorted(cast(set[int], keys), reverse=True)[:KEEP_PER_SCHEDULE]
    items = _rows(models.enqueue_history, (k for k in shown if before is None or k < before))
    return _page(items, limit, lambda last: encode_cursor(HISTORY_CURSOR, last.event_id))


# Jobs


def job(models: ReadModels, job_id: str) -> JobRow | None:
    return models.jobs.get(job_id) if could_be_stored(job_id) else None


def jobs(models: ReadModels, job_ids: Iterable[str]) -> dict[str, JobRow]:
    wanted = [job_id for job_id in dict.fromkeys(job_ids) if could_be_stored(job_id)]
    return {row.job_id: row for row in _rows(models.jobs, wanted)}


def job_for_tick(models: ReadModels, schedule_id: str, tick_ms: int) -> JobRow | None:
    found = _rows(models.jobs, models.jobs.keys_where(TICK_ORIGIN, (schedule_id, tick_ms)))
    return found[0] if found else None


def _pending(models: ReadModels, queue: str) -> list[JobRow]:
    return _rows(models.jobs, models.jobs.keys_where(PENDING_IN, queue))


def claimable(
    models: ReadModels,
    capacity: Mapping[str, int],
    kinds: Collection[str],
    now_ms: int,
    slots: Slots | None = None,
) -> list[JobRow]:
    """What a claim takes, in claim order, within `slots` (which it counts)."""
    return claim_policy.choose_claims(
        lambda queue: _pending(models, queue),
        capacity,
        kinds,
        now_ms,
        _paused(models),
        lambda schedule_id: _live_tick_times(models, schedule_id),
        slots,
    )


def _paused(models: ReadModels) -> set[str]:
    return {row.queue for _, row in models.paused_queues.items()}


def _live_tick_times(models: ReadModels, schedule_id: str) -> list[int]:
    return [job.tick_ms for job in live_ticks(models, [schedule_id])[schedule_id]]


def limits(models: ReadModels) -> tuple[list[ConcurrencyLimitRow], list[RateLimitRow]]:
    by_scope = sorted((row for _, row in models.concurrency_limits.items()), key=_scope)
    by_class = sorted((row for _, row in models.rate_limits.items()), key=_rate_class)
    return by_scope, by_class


def rate_windows(models: ReadModels) -> list[RateLimit]:
    """Every rate class's limit, as the claim's rules read it."""
    return [row.limit() for row in limits(models)[1]]


def _scope(row: ConcurrencyLimitRow) -> str:
    return row.scope


def _rate_class(row: RateLimitRow) -> str:
    return row.rate_class


def running_counts(models: ReadModels) -> dict[RunningKey, int]:
    counts: dict[RunningKey, int] = {}
    for _, row in models.jobs.items():
        if row.state == JobState.RUNNING:
            key = (row.queue, row.kind, row.partition_key)
            counts[key] = counts.get(key, 0) + 1
    return counts


def turns(
    models: ReadModels,
    current: Mapping[Lane, int],
    lanes: Collection[Lane],
    partitions: Collection[tuple[str, int, str]],
) -> Turns:
    """The gate's fair-share facts (as the SQL store's `claiming.turns`)."""
    return claim_policy.turns((row for _, row in models.jobs.items()), current, lanes, partitions)


def live_ticks(models: ReadModels, schedule_ids: Iterable[str]) -> dict[str, list[LiveTickJob]]:
    """schedule id -> its pending and running tick jobs, oldest tick first."""
    found: dict[str, list[LiveTickJob]] = {}
    for schedule_id in dict.fromkeys(schedule_ids):
        rows = _rows(models.jobs, models.jobs.keys_where(LIVE_TICKS_OF, schedule_id))
        found[schedule_id] = [
            LiveTickJob(row.job_id, row.periodic_tick_ms or 0, row.state, row.version)
            for row in sorted(rows, key=lambda row: row.periodic_tick_ms or 0)
        ]
    return found


def running_on(models: ReadModels, worker_ids: Collection[str]) -> list[JobRow]:
    keys = set().union(*(models.jobs.keys_where(RUNNING_ON, w) for w in worker_ids))
    return _rows(models.jobs, keys)


def late_jobs(
    models: ReadModels,
    queues: Collection[str],
    kinds: Collection[str],
    now_ms: int,
    limit: int,
) -> list[JobRow]:
    wanted = set(kinds)
    late = [
        row
        for queue in queues
        for row in _pending(models, queue)
        if row.kind in wanted and claim_policy.is_late(row.start_by_ms, now_ms)
    ]
    return sorted(late, key=lambda row: (row.start_by_ms, row.job_id))[:limit]


def pending_like(models: ReadModels, kind: str, payload: str, limit: int) -> list[JobRow]:
    pending = (row for _, row in models.jobs.items() if row.state == JobState.PENDING)
    like = [row for row in pending if row.kind == kind and row.payload == payload]
    return sorted(like, key=_by_run_at)[:limit]


def jobs_page(models: ReadModels, where: JobFilter, limit: int, cursor: str | None) -> Page[JobRow]:
    """Newest first, by (created_at_ms, job_id)."""
    check_limit(limit, MAX_PAGE)
    before = None if cursor is None else decode_timed_cursor(JOBS_CURSOR, cursor)
    matching = [
        row
        for row in _matching_jobs(models, where)
        if before is None or (row.created_at_ms, row.job_id) < before
    ]
    matching.sort(key=lambda row: (row.created_at_ms, row.job_id), reverse=True)
    return _page(
        matching,
        limit,
        lambda last: encode_timed_cursor(JOBS_CURSOR, last.created_at_ms, last.job_id),
    )


def state_counts(models: ReadModels, where: JobFilter, cap: int) -> dict[str, int]:
    check_limit(cap, STATE_COUNT_CAP)
    counts = dict.fromkeys((state.value for state in JobState), 0)
    for row in _matching_jobs(models, replace(where, state=None)):
        counts[row.state] = min(cap, counts[row.state] + 1)
    return counts


def _matching_jobs(models: ReadModels, where: JobFilter) -> list[JobRow]:
    wanted = {
        "state": where.state,
        "queue": where.queue,
        "kind": where.kind,
        "periodic_schedule_id": where.schedule_id,
        "run_now_schedule_id": where.run_now_schedule_id,
    }
    wanted = {column: value for column, value in wanted.items() if value is not None}
    made_by = where.made_by_schedule
    if not all(could_be_stored(value) for value in [*wanted.values(), made_by or "-"]):
        return []
    searched = {where.search, *where.search_ids} if where.search is not None else set()
    return [
        row
        for _, row in models.jobs.items()
        if all(getattr(row, column) == value for column, value in wanted.items())
        and (made_by is None or made_by in (row.periodic_schedule_id, row.run_now_schedule_id))
        and (
            where.search is None
            or row.job_id in searched
            or (row.unique_key is not None and row.unique_key == where.search)
        )
    ]


def job_attempts(models: ReadModels, job_id: str, limit: int) -> list[JobAttemptRow]:
    if not could_be_stored(job_id):
        return []
    keys = cast(set[int], models.job_attempts.keys_where(OF_JOB, job_id))
    return _rows(models.job_attempts, sorted(keys, reverse=True)[:limit])


def latest_attempts(models: ReadModels, job_ids: Collection[str]) -> dict[str, JobAttemptRow]:
    found: dict[str, JobAttemptRow] = {}
    for job_id in dict.fromkeys(job_ids):
        newest = job_attempts(models, job_id, 1)
        if newest:
            found[job_id] = newest[0]
    return found


def earliest_claimable(
    models: ReadModels,
    queues: Collection[str],
    kinds: Collection[str],
    after_ms: int | None = None,
) -> int | None:
    return claim_policy.earliest_claimable(
        (row for queue in dict.fromkeys(queues) for row in _pending(models, queue)),
        kinds,
        _paused(models),
        lambda schedule_id: _live_tick_times(models, schedule_id),
        after_ms,
    )


def paused_queues(models: ReadModels) -> dict[str, PausedQueueRow]:
    rows = sorted((row for _, row in models.paused_queues.items()), key=lambda row: row.queue)
    return {row.queue: row for row in rows}


def pending_work(models: ReadModels) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for _, row in models.jobs.items():
        if row.state == JobState.PENDING:
            counts[(row.queue, row.kind)] = counts.get((row.queue, row.kind), 0) + 1
    return counts


def job_counts(models: ReadModels) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for _, row in models.jobs.items():
        counts[row.queue, row.state] = counts.get((row.queue, row.state), 0) + 1
    return dict(sorted(counts.items()))


def oldest_pending(models: ReadModels) -> dict[str, int]:
    oldest: dict[str, int] = {}
    for _, row in models.jobs.items():
        if row.state == JobState.PENDING:
            oldest[row.queue] = min(row.run_at_ms, oldest.get(row.queue, row.run_at_ms))
    return dict(sorted(oldest.items()))


# Admission facts and the quarantine


def live_unique_key_holders(models: ReadModels, keys: Iterable[str]) -> dict[str, str]:
    """unique key -> id of the pending or running job holding it."""
    found: dict[str, str] = {}
    for key in dict.fromkeys(keys):
        holders = _rows(models.jobs, models.jobs.keys_where(LIVE_UNIQUE_KEY, key))
        if holders:
            found[key] = holders[0].job_id
    return found


def unfinished_counts(models: ReadModels, queues: Iterable[str]) -> dict[str, int]:
    """Pending and running jobs per queue (0 for a queue with none)."""
    return {
        queue: len(models.jobs.keys_where(UNFINISHED_IN, queue)) for queue in dict.fromkeys(queues)
    }


def quarantined(models: ReadModels, fingerprints: Iterable[str]) -> frozenset[str]:
    return frozenset(fp for fp in fingerprints if models.quarantine.get(fp) is not None)


def crash_blame(models: ReadModels, fingerprints: Collection[str]) -> dict[str, int]:
    blamed: dict[str, int] = {}
    for fingerprint in dict.fromkeys(fingerprints):
        row = models.crash_blame.get(fingerprint)
        blamed[fingerprint] = 0 if row is None else row.blame_milli
    return blamed


def quarantine_page(models: ReadModels, limit: int, cursor: str | None) -> Page[QuarantineRow]:
    """Newest first, by (quarantined_at_ms, fingerprint)."""
    check_limit(limit, MAX_PAGE)
    before = None if cursor is None else decode_timed_cursor(QUARANTINE_CURSOR, cursor)
    rows = [
        row
        for _, row in models.quarantine.items()
        if before is None or (row.quarantined_at_ms, row.fingerprint) < before
    ]
    rows.sort(key=lambda row: (row.quarantined_at_ms, row.fingerprint), reverse=True)

    def after(last: QuarantineRow) -> str:
        return encode_timed_cursor(QUARANTINE_CURSOR, last.quarantined_at_ms, last.fingerprint)

    return _page(rows, limit, after)


def quarantine_entry(models: ReadModels, fingerprint: str) -> QuarantineRow | None:
    return models.quarantine.get(fingerprint) if could_be_stored(fingerprint) else None


def _page(items: list[T], limit: int, cursor_after: Callable[[T], str]) -> Page[T]:
    """The first `limit` items, and a cursor after the last of them if more follow."""
    shown = items[:limit]
    return Page(shown, cursor_after(shown[-1]) if len(items) > limit else None)
