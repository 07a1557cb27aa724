"""Projections: plain functions of (row state, event) that materialise read models."""

from headgate._projections.base import AnyProjection, Projection
from headgate._projections.crash_blame import CRASH_BLAME, CrashBlameRow
from headgate._projections.enqueue_history import ENQUEUE_HISTORY, EnqueueEventRow
from headgate._projections.job_attempts import JOB_ATTEMPTS, JobAttemptRow
from headgate._projections.jobs import JOBS, JobRow
from headgate._projections.limits import (
    CONCURRENCY_LIMITS,
    RATE_LIMITS,
    ConcurrencyLimitRow,
    RateLimitRow,
)
from headgate._projections.paused_queues import PAUSED_QUEUES, PausedQueueRow
from headgate._projections.quarantine import QUARANTINE, QuarantineRow
from headgate._projections.schedule_runs import SCHEDULE_RUNS, ScheduleRunRow
from headgate._projections.schedules import SCHEDULES, ScheduleRow

ALL_PROJECTIONS: tuple[AnyProjection, ...] = (
    SCHEDULES,
    JOBS,
    ENQUEUE_HISTORY,
    QUARANTINE,
    JOB_ATTEMPTS,
    CRASH_BLAME,
    PAUSED_QUEUES,
    CONCURRENCY_LIMITS,
    RATE_LIMITS,
    SCHEDULE_RUNS,
)

__all__ = [
    "ALL_PROJECTIONS",
    "CONCURRENCY_LIMITS",
    "CRASH_BLAME",
    "ENQUEUE_HISTORY",
    "JOBS",
    "JOB_ATTEMPTS",
    "PAUSED_QUEUES",
    "QUARANTINE",
    "RATE_LIMITS",
    "SCHEDULES",
    "SCHEDULE_RUNS",
    "AnyProjection",
    "ConcurrencyLimitRow",
    "CrashBlameRow",
    "EnqueueEventRow",
    "JobAttemptRow",
    "JobRow",
    "PausedQueueRow",
    "Projection",
    "QuarantineRow",
    "RateLimitRow",
    "ScheduleRow",
    "ScheduleRunRow",
]
