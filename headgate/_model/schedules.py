"""The public read types of schedules: a schedule, its runs, health and tick attempts."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from typing import NamedTuple

from headgate._domain.options import SCHEDULE_FIELDS, ScheduleDefinition
from headgate._domain.ownership import overrides
from headgate._json import JsonValue
from headgate._model.rows import same_named
from headgate._projections import (
    EnqueueEventRow,
    ScheduleRow,
)
from headgate._projections.schedules import declared_of, definition_of
from headgate._store.port import RunRead


@dataclass(frozen=True)
class Schedule:
    """A schedule as read back. Each field is described once, for every surface:
    a definition field in `ScheduleDefinition` or `JobOptions`, the rest in
    `_domain/read_fields.SCHEDULE_READ`; `tests/test_option_parity.py` holds
    this class to them."""

    id: str
    spec: str
    kind: str
    queue: str
    payload: JsonValue
    on_missed: str
    backfill_max: int
    paused: bool
    next_run_ms: int
    last_enqueued_ms: int | None
    retry_at_ms: int | None
    max_attempts: int | None = None
    timeout_ms: int | None = None
    start_at_ms: int | None = None
    end_at_ms: int | None = None
    jitter_ms: int = 0
    finished: bool = False
    next_due_at_ms: int | None = None
    declared_in_code: bool = False
    overrides: tuple[str, ...] = ()
    undeclared_at_ms: int | None = None
    summary: str = ""
    priority: int | None = None
    overlap: str = "allow"
    start_within_ms: int | None = None
    partition_key: str | None = None
    rate_class: str | None = None

    @property
    def backfill_limit(self) -> int:
        """`backfill_max`'s former name (deprecated: goes in the next minor version)."""
        warnings.warn(
            "Schedule.backfill_limit is deprecated and will be removed in the next minor "
            "version: use Schedule.backfill_max",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.backfill_max

    @property
    def definition(self) -> ScheduleDefinition:
        """Its definition as one value object (as stored: unchecked)."""
        return ScheduleDefinition.restored_fields(
            {name: getattr(self, name) for name in SCHEDULE_FIELDS}
        )

    @classmethod
    def from_row(cls, row: ScheduleRow) -> Schedule:
        """The row's fields of the same name as they are (its definition's among
        them), then those a read makes."""
        declared = declared_of(row)
        made = {
            "id": row.schedule_id,
            "payload": json.loads(row.payload),
            "backfill_max": row.backfill_limit,
            "retry_at_ms": row.due_at_ms if row.failures else None,
            "next_due_at_ms": None if row.finished else row.due_at_ms,
            "declared_in_code": declared is not None,
            "overrides": () if declared is None else tuple(overrides(definition_of(row), declared)),
        }
        return cls(**{**same_named(row, cls), **made})


class UpcomingRun(NamedTuple):
    """A tick the schedule will fire if nothing changes, and when it is enqueued."""

    tick_ms: int
    """The tick's identity (its job's periodic_origin.tick_ms)."""
    due_at_ms: int
    """When it is enqueued: the tick, later by its jitter (or a retry time)."""


@dataclass(frozen=True)
class EnqueueEvent:
    """One automatic tick attempt, as operators see it (`hg.schedules.enqueue_events`, the API's
    enqueue-events): an `EnqueueAttempted` event, read from the enqueue_history
    projection (`EnqueueEventRow`). `event_id` is the event's log position."""

    event_id: int
    schedule_id: str
    tick_ms: int
    job_id: str
    outcome: str
    reason: str
    recorded_at_ms: int

    @classmethod
    def from_row(cls, row: EnqueueEventRow) -> EnqueueEvent:
        return cls(
            row.event_id,
            row.schedule_id,
            row.tick_ms,
            row.job_id,
            row.outcome,
            row.reason,
            row.recorded_at_ms,
        )


@dataclass(frozen=True)
class EnqueueEventsPage:
    events: list[EnqueueEvent]
    next_cursor: str | None


@dataclass(frozen=True)
class ScheduleRun:
    """What became of one of a schedule's runs: a tick's job, or an Enqueue now's
    (`manual`). Read from the schedule_runs projection and, until it settles,
    its job (`hg.schedules.runs`)."""

    job_id: str
    schedule_id: str
    tick_ms: int | None
    """The tick it ran for; None for an Enqueue now."""
    manual: bool
    outcome: str
    """enqueued (waiting), running, retrying (an attempt failed; it runs again),
    succeeded, failed, expired (not started by its deadline), cancelled or
    quarantined."""
    attempts: int
    """Attempts that ended."""
    enqueued_at_ms: int
    started_at_ms: int | None
    """When its last ended attempt started."""
    finished_at_ms: int | None
    """When it settled (or, retrying, when its last attempt ended)."""
    duration_ms: int | None
    """How long its last ended attempt ran."""
    error_type: str | None
    """Its last failed attempt's error type (the message and traceback are on the job)."""

    @classmethod
    def from_read(cls, read: RunRead) -> ScheduleRun:
        run, facts = read.run, read.facts()
        return cls(
            run.job_id,
            run.schedule_id,
            run.tick_ms,
            run.manual,
            facts.outcome,
            run.attempts,
            run.enqueued_at_ms,
            run.started_at_ms,
            run.finished_at_ms,
            facts.duration_ms,
            run.error_type,
        )


@dataclass(frozen=True)
class ScheduleRunsPage:
    runs: list[ScheduleRun]
    next_cursor: str | None


@dataclass(frozen=True)
class ScheduleHealth:
    """How a schedule is doing (`hg.schedules.health`), read from its newest
    100 runs and its row at `as_of_ms`.

    `state` is the first of these that holds: `paused`; `missing` (a tick has
    been due longer than `grace_ms` and none fired: nobody is the scheduler, or
    it is behind); `failing` (its newest settled run failed,
    `consecutive_failures` in a row; a cancelled run counts neither way);
    `late` (a tick's job has waited longer than `grace_ms` to start); else `ok`.
    """

    schedule_id: str
    state: str
    consecutive_failures: int
    last_success_ms: int | None
    last_failure_ms: int | None
    last_error_type: str | None
    duration_p50_ms: int | None
    duration_p95_ms: int | None
    """Of the recent runs that ran to an end (None: none has)."""
    last_run: ScheduleRun | None
    """Its newest run (None: it has none yet)."""
    runs_read: int
    """How many recent runs the figures come from (at most 100)."""
    as_of_ms: int
    grace_ms: int


@dataclass(frozen=True)
class SchedulesPage:
    schedules: list[Schedule]
    next_cursor: str | None


@dataclass(frozen=True)
class PutScheduleResult:
    """What `put_definition` did to one schedule."""

    schedule: Schedule
    outcome: str
    """"created" (new, or defined again after a delete), "updated" or "unchanged"
    (identical: nothing written)."""


@dataclass(frozen=True)
class PutSchedulesResult:
    """What `hg.schedules.put_many` did: each schedule's outcome, by id, in the call's order."""

    outcomes: dict[str, str]
    """id -> "created" (new, or defined again after a delete), "updated" (changed;
    an unchanged spec kept its phase) or "unchanged" (identical: nothing written)."""

    def _count(self, outcome: str) -> int:
        return sum(1 for value in self.outcomes.values() if value == outcome)

    @property
    def created(self) -> int:
        return self._count("created")

    @property
    def updated(self) -> int:
        return self._count("updated")

    @property
    def unchanged(self) -> int:
        return self._count("unchanged")


class EnqueueNowResult(NamedTuple):
    job_id: str
    replayed: bool
