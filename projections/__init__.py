"""Projections: plain functions of (row state, event) that materialise read models."""

from headgate._projections.base import AnyProjection, Projection
from headgate._projections.enqueue_history import ENQUEUE_HISTORY, EnqueueHistoryRow
from headgate._projections.jobs import JOBS, JobRow
from headgate._projections.quarantine import QUARANTINE, QuarantineRow
from headgate._projections.schedules import SCHEDULES, ScheduleRow

ALL_PROJECTIONS: tuple[AnyProjection, ...] = (SCHEDULES, JOBS, ENQUEUE_HISTORY, QUARANTINE)

__all__ = [
    "ALL_PROJECTIONS",
    "ENQUEUE_HISTORY",
    "JOBS",
    "QUARANTINE",
    "SCHEDULES",
    "AnyProjection",
    "EnqueueHistoryRow",
    "JobRow",
    "Projection",
    "QuarantineRow",
    "ScheduleRow",
]
