"""The memory store's read models: one table per projection, keyed as the
projection keys its rows, with the indexes the queries and the store's
rules (one job per tick, one live job per unique key) look rows up by."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from headgate._domain.events import UNFINISHED_STATES, JobState
from headgate._projections import (
    ALL_PROJECTIONS,
    EnqueueEventRow,
    JobAttemptRow,
    JobRow,
    ScheduleRow,
    ScheduleRunRow,
)
from headgate._store.memory.tables import IndexKey, Table

DUE: Final = "due"
PENDING_IN: Final = "pending_in"
UNFINISHED_IN: Final = "unfinished_in"
RUNNING_ON: Final = "running_on"
TICK_ORIGIN: Final = "tick_origin"
LIVE_UNIQUE_KEY: Final = "live_unique_key"
OF_SCHEDULE: Final = "of_schedule"
OF_JOB: Final = "of_job"
LIVE_TICKS_OF: Final = "live_ticks_of"
RUNS_OF: Final = "runs_of"


def _due(row: ScheduleRow) -> bool | None:
    """Live, unpaused and not finished: what the due read looks at."""
    return True if not (row.paused or row.deleted or row.finished) else None


def _pending_in(row: JobRow) -> str | None:
    return row.queue if row.state == JobState.PENDING else None


def _unfinished_in(row: JobRow) -> str | None:
    return row.queue if row.state in UNFINISHED_STATES else None


def _running_on(row: JobRow) -> str | None:
    return row.worker_id if row.state == JobState.RUNNING else None


def _tick_origin(row: JobRow) -> tuple[str, int] | None:
    if row.periodic_schedule_id is None or row.periodic_tick_ms is None:
        return None
    return row.periodic_schedule_id, row.periodic_tick_ms


def _live_unique_key(row: JobRow) -> str | None:
    """A pending or running job's unique key: no other such job may hold it."""
    return row.unique_key if row.state in UNFINISHED_STATES else None


def _live_ticks_of(row: JobRow) -> str | None:
    """A pending or running tick job's schedule (what overlap policies ask about)."""
    return row.periodic_schedule_id if row.state in UNFINISHED_STATES else None


def _of_schedule(row: EnqueueEventRow) -> str:
    return row.schedule_id


def _of_job(row: JobAttemptRow) -> str:
    return row.job_id


def _runs_of(row: ScheduleRunRow) -> str:
    return row.schedule_id


INDEXES: Final[Mapping[str, Mapping[str, IndexKey[Any]]]] = {
    "schedules": {DUE: _due},
    "jobs": {
        PENDING_IN: _pending_in,
        UNFINISHED_IN: _unfinished_in,
        RUNNING_ON: _running_on,
        TICK_ORIGIN: _tick_origin,
        LIVE_UNIQUE_KEY: _live_unique_key,
        LIVE_TICKS_OF: _live_ticks_of,
    },
    "enqueue_history": {OF_SCHEDULE: _of_schedule},
    "job_attempts": {OF_JOB: _of_job},
    "schedule_runs": {RUNS_OF: _runs_of},
}
"""Indexes by projection table (a table not named here has none)."""


def empty_tables() -> dict[str, Table[Any]]:
    """A table per projection, by the projection's table name."""
    return {
        projection.table: Table(INDEXES.get(projection.table, {})) for projection in ALL_PROJECTIONS
    }
