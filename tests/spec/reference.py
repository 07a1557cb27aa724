"""A brute-force reference for cron ticks, written for clarity, not speed.

It walks local calendar days and wall-clock times in order and asks zoneinfo
(PEP 495) which wall times exist and when they first occur. It shares no code
with the engine: field values come from the test's own description of a spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

SEARCH_YEARS = 40


@dataclass(frozen=True)
class CronSets:
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]  # 0 = Sunday
    day_of_month_restricted: bool
    day_of_week_restricted: bool

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        by_date = day.day in self.days_of_month
        by_weekday = day.isoweekday() % 7 in self.days_of_week
        if self.day_of_month_restricted and self.day_of_week_restricted:
            return by_date or by_weekday
        return by_date and by_weekday


def wall_exists(wall: datetime, zone: ZoneInfo) -> bool:
    instant = wall.replace(tzinfo=zone).timestamp()
    return datetime.fromtimestamp(instant, zone).replace(tzinfo=None) == wall


def first_instant(wall: datetime, zone: ZoneInfo) -> int:
    return int(wall.replace(tzinfo=zone, fold=0).timestamp())


def latest_instant(wall: datetime, zone: ZoneInfo) -> int:
    return int(max(wall.replace(tzinfo=zone, fold=f).timestamp() for f in (0, 1)))


def reference_next_ms(sets: CronSets, zone: ZoneInfo, after_ms: int) -> int | None:
    after_s = after_ms // 1000
    day = datetime.fromtimestamp(after_s, zone).date() - timedelta(days=1)
    last_day = day + timedelta(days=366 * SEARCH_YEARS)
    while day <= last_day:
        if sets.day_matches(day):
            found = _first_on_day(sets, zone, day, after_s)
            if found is not None:
                return found * 1000
        day += timedelta(days=1)
    return None


def _first_on_day(sets: CronSets, zone: ZoneInfo, day: date, after_s: int) -> int | None:
    for hour in sorted(sets.hours):
        if latest_instant(datetime.combine(day, time(hour, 59, 59)), zone) <= after_s:
            continue
        for minute in sorted(sets.minutes):
            if latest_instant(datetime.combine(day, time(hour, minute, 59)), zone) <= after_s:
                continue
            for second in sorted(sets.seconds):
                wall = datetime.combine(day, time(hour, minute, second))
                if not wall_exists(wall, zone):
                    continue
                instant = first_instant(wall, zone)
                if instant > after_s:
                    return instant
    return None


def has_any_date(sets: CronSets) -> bool:
    """Whether some (month, day) of the spec exists in a leap year."""
    if sets.day_of_month_restricted and sets.day_of_week_restricted:
        return True
    for month in sets.months:
        for day_number in sets.days_of_month:
            try:
                date(2000, month, day_number)
            except ValueError:
                continue
            return True
    return False
