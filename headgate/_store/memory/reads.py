"""The memory store's reads: each a query over the committed read models, held
still while it runs."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TypeVar

from headgate._domain import claim_policy
from headgate._projections import (
    EnqueueEventRow,
    JobAttemptRow,
    JobRow,
    PausedQueueRow,
    QuarantineRow,
    ScheduleRow,
)
from headgate._store.memory import queries
from headgate._store.memory.queries import ReadModels
from headgate._store.memory.state import MemoryState
from headgate._store.port import HealthFilter, JobFilter, LimitsState, Page, Reads, RunRead

T = TypeVar("T")


class MemoryReads(Reads):
    def __init__(self, state: MemoryState) -> None:
        self._state = state

    def _read(self, query: Callable[[ReadModels], T]) -> T:
        with self._state.reading():
            return query(self._state.models)

    def schedule(self, schedule_id: str) -> ScheduleRow | None:
        return self._read(lambda models: queries.schedule(models, schedule_id))

    def schedules_page(
        self,
        limit: int,
        cursor: str | None,
        search: str | None = None,
        health: HealthFilter | None = None,
    ) -> Page[ScheduleRow]:
        return self._read(
            lambda models: queries.schedules_page(models, limit, cursor, search, health)
        )

    def schedule_count(self, search: str | None = None, health: HealthFilter | None = None) -> int:
        return self._read(lambda models: queries.schedule_count(models, search, health))

    def schedule_runs(self, schedule_id: str, limit: int, cursor: str | None) -> Page[RunRead]:
        return self._read(lambda models: queries.schedule_runs(models, schedule_id, limit, cursor))

    def recent_runs(
        self, schedule_ids: Collection[str], per_schedule: int
    ) -> dict[str, list[RunRead]]:
        return self._read(lambda models: queries.recent_runs(models, schedule_ids, per_schedule))

    def spec_counts(self, excluding: Collection[str] = ()) -> dict[str, int]:
        return self._read(lambda models: queries.spec_counts(models, excluding))

    def due_schedules(self, now_ms: int, limit: int) -> list[ScheduleRow]:
        return self._read(lambda models: queries.due_schedules(models, now_ms, limit))

    def earliest_due_at(self) -> int | None:
        return self._read(queries.earliest_due_at)

    def enqueue_history(
        self, schedule_id: str, limit: int, cursor: str | None
    ) -> Page[EnqueueEventRow]:
        return self._read(
            lambda models: queries.enqueue_history(models, schedule_id, limit, cursor)
        )

    def job(self, job_id: str) -> JobRow | None:
        return self._read(lambda models: queries.job(models, job_id))

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobRow]:
        return self._read(lambda models: queries.jobs(models, job_ids))

    def jobs_page(self, where: JobFilter, limit: int, cursor: str | None) -> Page[JobRow]:
        return self._read(lambda models: queries.jobs_page(models, where, limit, cursor))

    def job_attempts(self, job_id: str, limit: int) -> list[JobAttemptRow]:
        return self._read(lambda models: queries.job_attempts(models, job_id, limit))

    def state_counts(self, where: JobFilter, cap: int) -> dict[str, int]:
        return self._read(lambda models: queries.state_counts(models, where, cap))

    def latest_attempts(self, job_ids: Collection[str]) -> dict[str, JobAttemptRow]:
        return self._read(lambda models: queries.latest_attempts(models, job_ids))

    def earliest_claimable(self, queues: Collection[str], kinds: Collection[str]) -> int | None:
        return self._read(lambda models: queries.earliest_claimable(models, queues, kinds))

    def next_claimable_at(
        self, queues: Collection[str], kinds: Collection[str], now_ms: int
    ) -> int | None:
        with self._state.reading():
            models = self._state.models
            scheduled = queries.earliest_claimable(models, queues, kinds, after_ms=now_ms)
            frees = claim_policy.rate_slot_frees_at(
                queries.rate_windows(models), self._state.rate_starts, now_ms
            )
        return min((at for at in (scheduled, frees) if at is not None), default=None)

    def pending_work(self) -> dict[tuple[str, str], int]:
        return self._read(queries.pending_work)

    def paused_queues(self) -> dict[str, PausedQueueRow]:
        return self._read(queries.paused_queues)

    def limits_state(self, now_ms: int) -> LimitsState:
        with self._state.reading():
            models = self._state.models
            limits, rates = queries.limits(models)
            started = claim_policy.recent_starts(
                queries.rate_windows(models), self._state.rate_starts, now_ms
            )
            return LimitsState(limits, rates, queries.running_counts(models), started)

    def quarantine_page(self, limit: int, cursor: str | None) -> Page[QuarantineRow]:
        return self._read(lambda models: queries.quarantine_page(models, limit, cursor))

    def quarantine_entry(self, fingerprint: str) -> QuarantineRow | None:
        return self._read(lambda models: queries.quarantine_entry(models, fingerprint))

    def due_count(self, now_ms: int) -> int:
        return self._read(lambda models: queries.due_count(models, now_ms))

    def job_counts(self) -> dict[tuple[str, str], int]:
        return self._read(queries.job_counts)

    def oldest_pending(self) -> dict[str, int]:
        return self._read(queries.oldest_pending)

    def quarantined_count(self) -> int:
        return self._read(lambda models: len(models.quarantine))

    def undeclared_count(self) -> int:
        return self._read(queries.undeclared_count)
