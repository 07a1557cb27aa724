"""What became of each schedule's runs, and how each schedule is doing: the reads
behind `hg.schedules.runs`, `health` and the health filter of
`list`, shared by the API, the CLI, the console and the metrics.

Health is judged at read time from the schedule's newest runs and its row
(`_domain/schedule_health.py`), so it is never stale and needs no writer: a
page of schedules costs one read of its rows and one of their runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from headgate._clock import Clock
from headgate._domain.schedule_health import RECENT_RUNS, HealthState, health_of
from headgate._errors import NotFound, ValidationError
from headgate._model import Schedule, ScheduleHealth, ScheduleRun, ScheduleRunsPage
from headgate._store.port import HealthFilter, Reads, RunRead

HEALTH_STATES: Final = tuple(state.value for state in HealthState)


def health_filter_state(value: str | None) -> HealthState | None:
    """A `health` filter as a caller gives it, checked: None or "" for none."""
    if not value:
        return None
    try:
        return HealthState(value)
    except ValueError:
        raise ValidationError(
            "health", f"must be one of {', '.join(HEALTH_STATES)}, got {value!r}"
        ) from None


class RunReads:
    def __init__(self, reads: Reads, clock: Clock, grace_ms: int) -> None:
        self._reads = reads
        self._clock = clock
        self.grace_ms = grace_ms

    def runs(self, schedule_id: str, limit: int, cursor: str | None) -> ScheduleRunsPage:
        page = self._reads.schedule_runs(schedule_id, limit, cursor)
        return ScheduleRunsPage(
            [ScheduleRun.from_read(read) for read in page.items], page.next_cursor
        )

    def filter(self, state: str | None) -> HealthFilter | None:
        wanted = health_filter_state(state)
        if wanted is None:
            return None
        return HealthFilter(wanted, self._clock.now_ms(), self.grace_ms)

    def health(self, schedule_id: str) -> ScheduleHealth:
        row = self._reads.schedule(schedule_id)
        if row is None or row.deleted:
            raise NotFound(f"no schedule {schedule_id!r}")
        return self.health_of([Schedule.from_row(row)])[schedule_id]

    def health_of(self, schedules: Sequence[Schedule]) -> dict[str, ScheduleHealth]:
        """Each schedule's health, by id, from one read of all their newest runs."""
        now = self._clock.now_ms()
        runs = self._reads.recent_runs([schedule.id for schedule in schedules], RECENT_RUNS)
        return {
            schedule.id: self._judged(schedule, runs.get(schedule.id, []), now)
            for schedule in schedules
        }

    def _judged(self, schedule: Schedule, runs: list[RunRead], now_ms: int) -> ScheduleHealth:
        judged = health_of(
            [read.facts() for read in runs],
            paused=schedule.paused,
            due_at_ms=schedule.next_due_at_ms,
            now_ms=now_ms,
            grace_ms=self.grace_ms,
        )
        return ScheduleHealth(
            schedule_id=schedule.id,
            state=judged.state.value,
            consecutive_failures=judged.consecutive_failures,
            last_success_ms=judged.last_success_ms,
            last_failure_ms=judged.last_failure_ms,
            last_error_type=judged.last_error_type,
            duration_p50_ms=judged.duration_p50_ms,
            duration_p95_ms=judged.duration_p95_ms,
            last_run=ScheduleRun.from_read(runs[0]) if runs else None,
            runs_read=judged.runs_read,
            as_of_ms=now_ms,
            grace_ms=self.grace_ms,
        )
