"""The store-wide ceilings on schedules: how many, and how many ticks a second.

Each schedule is cheap to define and costs the store at every tick: one bulk
request of 2,000 `@every:1000` schedules (150 KB) wrote 122,000 jobs a minute.
So a write that defines schedules is refused when the store would then hold
more than `max_schedules` live ones, or when they would tick more than
`max_ticks_per_s` times a second in all, each counted at its busiest hour
(`ScheduleSpec.busiest_hour_ticks`: an `@every:1000` is 1 a second, a daily
cron 1/3600). Live: not deleted and not finished (paused ones count: resuming
one is not checked). A write that raises neither figure, or brings one down,
is never refused, so a store above a lowered ceiling can still be changed.

The figures are read from committed state as the write begins: writers at the
same moment can each pass and together exceed a ceiling by their own
schedules, never more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from headgate._domain.spec import HOUR_MS, InvalidSpec, parse_spec

MAX_SCHEDULES_LIMIT: Final = 10_000_000
MAX_TICKS_PER_S_LIMIT: Final = 1_000_000
_FLOAT_SLACK: Final = 1e-9
"""A hair of float error must not refuse a store exactly at its ceiling."""


@dataclass(frozen=True)
class Ceilings:
    max_schedules: int
    max_ticks_per_s: int


@dataclass(frozen=True)
class Load:
    """What a set of live schedules costs: how many, and ticks a second."""

    schedules: int
    ticks_per_s: float

    @classmethod
    def of(cls, spec_counts: Mapping[str, int]) -> Load:
        """The load of `spec_counts` (how many live schedules have each spec)."""
        return cls(
            sum(spec_counts.values()),
            sum(count * ticks_per_s(spec) for spec, count in spec_counts.items()),
        )

    def over(self, ceilings: Ceilings) -> bool:
        """Past either ceiling: only then may a write that makes this load be
        refused (`load_problem`)."""
        return (
            self.schedules > ceilings.max_schedules
            or self.ticks_per_s > ceilings.max_ticks_per_s + _FLOAT_SLACK
        )

    def plus(self, specs: Iterable[str]) -> Load:
        added = list(specs)
        return Load(
            self.schedules + len(added),
            self.ticks_per_s + sum(ticks_per_s(spec) for spec in added),
        )


@lru_cache(maxsize=4096)
def ticks_per_s(spec: str) -> float:
    """A spec's ticks a second at its busiest hour; one that no longer parses
    (stored by another build) costs nothing: it never ticks here."""
    try:
        return parse_spec(spec).busiest_hour_ticks * 1000 / HOUR_MS
    except InvalidSpec:
        return 0.0


def load_problem(before: Load, after: Load, ceilings: Ceilings) -> tuple[str, str] | None:
    """Which ceiling (`max_schedules` or `max_ticks_per_s`) the write that makes
    `before` into `after` would break and how, or None."""
    if after.schedules > ceilings.max_schedules and after.schedules > before.schedules:
        return "max_schedules", (
            f"the store would hold {after.schedules:,} schedules, over max_schedules "
            f"{ceilings.max_schedules:,} (RuntimeConfig.max_schedules, serve "
            "--max-schedules, $HEADGATE_MAX_SCHEDULES): delete some first, or raise it"
        )
    over = after.ticks_per_s > ceilings.max_ticks_per_s + _FLOAT_SLACK
    if over and after.ticks_per_s > before.ticks_per_s + _FLOAT_SLACK:
        return "max_ticks_per_s", (
            f"the store's schedules would tick {_rate(after.ticks_per_s)} times a second "
            f"(each at its busiest hour), over max_ticks_per_s {ceilings.max_ticks_per_s:,} "
            "(RuntimeConfig.max_ticks_per_s, serve --max-ticks-per-s, "
            "$HEADGATE_MAX_TICKS_PER_S): choose longer intervals, or raise it"
        )
    return None


def _rate(ticks_per_s: float) -> str:
    """1.0003 as "1.0003", 3.0 as "3": enough digits to show it is over."""
    return f"{ticks_per_s:,.4f}".rstrip("0").rstrip(".")
