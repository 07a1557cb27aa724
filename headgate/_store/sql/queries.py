"""Queries over the projections: what the scheduler, the API and the console read.

Each query is a function of a Connection so it can run inside a write
transaction (seeing that transaction's own appends) or on its own
(`SqlReads`, the port's read side).
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import (
    Engine,
)

from headgate._domain.admission import check_limit
from headgate._projections import (
    EnqueueEventRow,
    JobAttemptRow,
    JobRow,
    PausedQueueRow,
    QuarantineRow,
    ScheduleRow,
)
from headgate._store.port import (
    STATE_COUNT_CAP,
    HealthFilter,
    JobFilter,
    LimitsState,
    Page,
    Reads,
    RunRead,
)
from headgate._store.sql import flow_facts, runs
from headgate._store.sql.engine import translated_errors
from headgate._store.sql.job_reads import (
    earliest_claimable,
    job,
    job_attempts,
    job_counts,
    jobs,
    jobs_page,
    latest_attempts,
    next_run_after,
    oldest_pending,
    pending_work,
    state_counts,
)
from headgate._store.sql.quarantine_reads import (
    paused_queues,
    quarantine_entry,
    quarantine_page,
    quarantined_count,
)
from headgate._store.sql.schedule_reads import (
    due_count,
    due_schedules,
    earliest_due_at,
    enqueue_history_page,
    schedule,
    schedule_count,
    schedules_page,
    spec_counts,
    undeclared_count,
)


class SqlReads(Reads):
    """The read queries, each on its own short read transaction."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def schedule(self, schedule_id: str) -> ScheduleRow | None:
        with translated_errors("reading a schedule"), self._engine.connect() as connection:
            return schedule(connection, schedule_id)

    def schedules_page(
        self,
        limit: int,
        cursor: str | None,
        search: str | None = None,
        health: HealthFilter | None = None,
    ) -> Page[ScheduleRow]:
        with translated_errors("listing schedules"), self._engine.connect() as connection:
            return schedules_page(connection, limit, cursor, search, health=health)

    def schedule_count(self, search: str | None = None, health: HealthFilter | None = None) -> int:
        with translated_errors("counting schedules"), self._engine.connect() as connection:
            return schedule_count(connection, search, health)

    def schedule_runs(self, schedule_id: str, limit: int, cursor: str | None) -> Page[RunRead]:
        with translated_errors("reading a schedule's runs"), self._engine.connect() as connection:
            return runs.schedule_runs_page(connection, schedule_id, limit, cursor)

    def recent_runs(
        self, schedule_ids: Collection[str], per_schedule: int
    ) -> dict[str, list[RunRead]]:
        with translated_errors("reading schedules' runs"), self._engine.connect() as connection:
            return runs.recent_runs(connection, schedule_ids, per_schedule)

    def spec_counts(self, excluding: Collection[str] = ()) -> dict[str, int]:
        with translated_errors("counting schedules by spec"), self._engine.connect() as connection:
            return spec_counts(connection, excluding)

    def due_schedules(self, now_ms: int, limit: int) -> list[ScheduleRow]:
        with translated_errors("reading due schedules"), self._engine.connect() as connection:
            return due_schedules(connection, now_ms, limit)

    def earliest_due_at(self) -> int | None:
        with translated_errors("reading due schedules"), self._engine.connect() as connection:
            return earliest_due_at(connection)

    def job(self, job_id: str) -> JobRow | None:
        with translated_errors("reading a job"), self._engine.connect() as connection:
            return job(connection, job_id)

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobRow]:
        with translated_errors("reading jobs"), self._engine.connect() as connection:
            return jobs(connection, job_ids)

    def jobs_page(self, where: JobFilter, limit: int, cursor: str | None) -> Page[JobRow]:
        with translated_errors("listing jobs"), self._engine.connect() as connection:
            return jobs_page(connection, where, limit, cursor)

    def job_attempts(self, job_id: str, limit: int) -> list[JobAttemptRow]:
        with translated_errors("reading a job's attempts"), self._engine.connect() as connection:
            return job_attempts(connection, job_id, limit)

    def state_counts(self, where: JobFilter, cap: int) -> dict[str, int]:
        check_limit(cap, STATE_COUNT_CAP)
        with translated_errors("counting jobs"), self._engine.connect() as connection:
            return state_counts(connection, where, cap)

    def latest_attempts(self, job_ids: Collection[str]) -> dict[str, JobAttemptRow]:
        with translated_errors("reading jobs' attempts"), self._engine.connect() as connection:
            return latest_attempts(connection, job_ids)

    def quarantine_page(self, limit: int, cursor: str | None) -> Page[QuarantineRow]:
        with translated_errors("listing quarantine"), self._engine.connect() as connection:
            return quarantine_page(connection, limit, cursor)

    def quarantine_entry(self, fingerprint: str) -> QuarantineRow | None:
        with translated_errors("reading quarantine"), self._engine.connect() as connection:
            return quarantine_entry(connection, fingerprint)

    def pending_work(self) -> dict[tuple[str, str], int]:
        with translated_errors("counting pending jobs"), self._engine.connect() as connection:
            return pending_work(connection)

    def earliest_claimable(self, queues: Collection[str], kinds: Collection[str]) -> int | None:
        with translated_errors("reading pending jobs"), self._engine.connect() as connection:
            return earliest_claimable(connection, queues, kinds)

    def next_claimable_at(
        self, queues: Collection[str], kinds: Collection[str], now_ms: int
    ) -> int | None:
        with translated_errors("reading pending jobs"), self._engine.connect() as connection:
            scheduled = next_run_after(connection, queues, kinds, now_ms)
            frees = flow_facts.rate_slot_frees_at(connection, now_ms)
        return min((at for at in (scheduled, frees) if at is not None), default=None)

    def paused_queues(self) -> dict[str, PausedQueueRow]:
        with translated_errors("reading paused queues"), self._engine.connect() as connection:
            return paused_queues(connection)

    def limits_state(self, now_ms: int) -> LimitsState:
        with translated_errors("reading limits"), self._engine.connect() as connection:
            return LimitsState(
                flow_facts.concurrency_limits(connection),
                flow_facts.rate_limits(connection),
                flow_facts.running_counts(connection),
                flow_facts.recent_starts(connection, now_ms),
            )

    def due_count(self, now_ms: int) -> int:
        with translated_errors("counting due schedules"), self._engine.connect() as connection:
            return due_count(connection, now_ms)

    def job_counts(self) -> dict[tuple[str, str], int]:
        with translated_errors("counting jobs"), self._engine.connect() as connection:
            return job_counts(connection)

    def oldest_pending(self) -> dict[str, int]:
        with translated_errors("reading pending jobs"), self._engine.connect() as connection:
            return oldest_pending(connection)

    def quarantined_count(self) -> int:
        with translated_errors("counting quarantines"), self._engine.connect() as connection:
            return quarantined_count(connection)

    def undeclared_count(self) -> int:
        with translated_errors("counting undeclared schedules"), self._engine.connect() as c:
            return undeclared_count(c)

    def enqueue_history(
        self, schedule_id: str, limit: int, cursor: str | None
    ) -> Page[EnqueueEventRow]:
        with translated_errors("reading enqueue history"), self._engine.connect() as connection:
            return enqueue_history_page(connection, schedule_id, limit, cursor)
