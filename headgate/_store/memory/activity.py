"""The activity roll-up in a memory store: its inputs read from the read models,
its points kept beside them (operational state, as the SQL store's table)."""

from __future__ import annotations

from collections.abc import Sequence

from headgate._domain.activity import MINUTE_MS, RAN, ActivityPoint, MinuteRows
from headgate._domain.events import JobState
from headgate._store.memory.state import MemoryState
from headgate._store.port.activity import ActivityLog


class MemoryActivityLog(ActivityLog):
    def __init__(self, state: MemoryState) -> None:
        self._state = state

    def minute_rows(self, minute_ms: int) -> MinuteRows:
        end = minute_ms + MINUTE_MS

        def within(instant_ms: int | None) -> bool:
            return instant_ms is not None and minute_ms <= instant_ms < end

        with self._state.reading():
            models = self._state.models
            ticks = [
                (row.outcome, max(row.recorded_at_ms - row.tick_ms, 0))
                for _, row in models.enqueue_history.items()
                if within(row.recorded_at_ms)
            ]
            attempts = []
            for _, attempt in models.job_attempts.items():
                if not within(attempt.ended_at_ms):
                    continue
                job = models.jobs.get(attempt.job_id)
                started, due = attempt.started_at_ms, None if job is None else job.run_at_ms
                pickup = None if started is None or due is None or due > started else started - due
                attempts.append((attempt.outcome, pickup))
            started_ended = sum(
                1
                for _, attempt in models.job_attempts.items()
                if attempt.outcome in RAN
                and attempt.ended_at_ms is not None
                and within(attempt.started_at_ms)
            )
            jobs = [row for _, row in models.jobs.items() if within(row.updated_at_ms)]
            return MinuteRows(
                ticks=ticks,
                attempts=attempts,
                expired=sum(1 for row in jobs if row.state == JobState.EXPIRED),
                started_ended=started_ended,
                started_running=sum(1 for row in jobs if row.state == JobState.RUNNING),
            )

    def record(
        self, minute_ms: int, points: Sequence[ActivityPoint], forget_before_ms: int
    ) -> None:
        with self._state.writing(), self._state.reading():
            kept = [
                point
                for point in self._state.activity
                if point.minute_ms != minute_ms and point.minute_ms >= forget_before_ms
            ]
            self._state.activity = sorted(
                [*kept, *points], key=lambda p: (p.minute_ms, p.series, p.key)
            )

    def points(self, since_ms: int) -> list[ActivityPoint]:
        with self._state.reading():
            return [point for point in self._state.activity if point.minute_ms >= since_ms]

    def last_minute(self) -> int | None:
        with self._state.reading():
            return self._state.activity[-1].minute_ms if self._state.activity else None
