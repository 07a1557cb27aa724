"""The activity roll-up's storage: the rows a minute is rolled up from, and the
points kept (`activity`). Written by the scheduler lease's holder once a minute;
read by the console's overview."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from headgate._domain.activity import ActivityPoint, MinuteRows


class ActivityLog(ABC):
    @abstractmethod
    def minute_rows(self, minute_ms: int) -> MinuteRows:
        """What the store holds of the minute starting at `minute_ms`: each enqueue
        attempt recorded in it (outcome, lateness after its tick), each attempt
        ended in it (outcome, pickup after the job was due, when its row still
        says), the jobs expired in it, and the running jobs claimed in it. Read
        on indexes of the enqueue history, the attempt history and the jobs."""

    @abstractmethod
    def record(
        self, minute_ms: int, points: Sequence[ActivityPoint], forget_before_ms: int
    ) -> None:
        """Keep `points` as the figures of the minute `minute_ms` (replacing any it
        had: a minute rolled up twice, by a new lease holder, is written whole
        once), and drop every point of a minute before `forget_before_ms`."""

    @abstractmethod
    def points(self, since_ms: int) -> list[ActivityPoint]:
        """Every point of a minute at or after `since_ms`, oldest minute first (then
        by series and key)."""

    @abstractmethod
    def last_minute(self) -> int | None:
        """The newest minute rolled up, or None."""
