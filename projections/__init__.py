"""Projections: plain functions of (row state, event) that materialise read models."""

from projections.base import AnyProjection, Projection
from projections.enqueue_history import ENQUEUE_HISTORY, EnqueueHistoryRow
from projections.jobs import JOBS, JobRow
from projections.quarantine import QUARANTINE, QuarantineRow
from projections.schedules import SCHEDULES, ScheduleRow

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
