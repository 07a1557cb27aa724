"""Mapping between UTC instants and a zone's wall clock, with our DST rules.

Wall time is represented as "wall seconds": the local calendar date and time
encoded as if it were a UTC epoch. Cron matching happens entirely in wall
seconds (no DST there), and this module decides which wall times exist and which
instant each one fires at:

* a wall time inside a spring-forward gap does not exist and never fires;
* a wall time repeated by a fall-back fires once, at its first occurrence.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo


class WallClock:
    """UTC <-> wall-second conversions for one zone (None means UTC)."""

    __slots__ = ("zone",)

    def __init__(self, zone: ZoneInfo | None) -> None:
        self.zone = zone

    def offset_at(self, utc_s: int) -> int:
        if self.zone is None:
            return 0
        offset = datetime.fromtimestamp(utc_s, self.zone).utcoffset()
        assert offset is not None
        return int(offset.total_seconds())

    def to_wall(self, utc_s: int) -> int:
        return utc_s + self.offset_at(utc_s)

    def first_instant(self, wall_s: int) -> int | None:
        """The instant a wall time first occurs at, or None inside a DST gap."""
        if self.zone is None:
            return wall_s
        naive = datetime.fromtimestamp(wall_s, UTC).replace(tzinfo=self.zone, fold=0)
        utc_s = int(naive.timestamp())
        return utc_s if self.to_wall(utc_s) == wall_s else None

    def gap_bounds(self, wall_s: int) -> tuple[int, int]:
        """For a wall time inside a gap: the gap's [first, end) in wall seconds."""
        before, after = self._offsets_around(wall_s)
        transition = self._transition_between(wall_s - after, wall_s - before)
        return transition + before, transition + after

    def repeated_window_end(self, utc_s: int) -> int | None:
        """If `utc_s` is a repeated wall time's second occurrence, the wall second
        at which the repeated window ends; otherwise None."""
        if self.zone is None:
            return None
        local = datetime.fromtimestamp(utc_s, self.zone)
        if local.fold == 0:
            return None
        earlier, later = self._offsets_around(self.to_wall(utc_s))
        transition = self._transition_between(utc_s - (earlier - later), utc_s)
        return transition + earlier

    def _offsets_around(self, wall_s: int) -> tuple[int, int]:
        """The offsets in force before and after the transition at this wall time."""
        naive = datetime.fromtimestamp(wall_s, UTC).replace(tzinfo=self.zone)
        before = naive.replace(fold=0).utcoffset()
        after = naive.replace(fold=1).utcoffset()
        assert before is not None and after is not None
        return int(before.total_seconds()), int(after.total_seconds())

    def _transition_between(self, low: int, high: int) -> int:
        """The first instant in (low, high] whose offset equals the one at `high`."""
        target = self.offset_at(high)
        while high - low > 1:
            middle = (low + high) // 2
            if self.offset_at(middle) == target:
                high = middle
            else:
                low = middle
        return high
