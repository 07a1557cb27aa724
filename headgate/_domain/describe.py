"""Human descriptions of specs, for the console ("At 09:00 on Mon to Fri, in words").

A cron is put in words only where the words are shorter than its fields and
say exactly what they do: a step that does not divide its cycle (`*/7`
minutes: 0, 7, … 56, then 0 again four minutes later) or a long list would
come out as the fields themselves, spelled longer. For those,
`describe_in_words` gives None, and the console shows the spec alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from headgate._domain.cron_fields import ParsedField
from headgate._domain.missed_runs import label
from headgate._domain.overlap import label as overlap_policy_label
from headgate._domain.spec import CronSpec, EverySpec, ScheduleSpec

_UNITS = ((86_400_000, "day"), (3_600_000, "hour"), (60_000, "minute"), (1_000, "second"))
_DAYS = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
RANGE_DASH: Final = "\N{EN DASH}"
LISTED_AT_MOST: Final = 4
"""Items (a value, or a range of them) a field's words may list."""


def describe_in_words(spec: ScheduleSpec) -> str | None:
    """What the spec fires on, with its zone; None for a cron whose words would
    only repeat its fields."""
    if isinstance(spec, EverySpec):
        return _every(spec.interval_ms)
    assert isinstance(spec, CronSpec)
    words = _cron(spec.fields)
    return None if words is None else f"{words}, {spec.zone_name}"


def describe(spec: ScheduleSpec) -> str:
    """As `describe_in_words`, but always something: for a cron it cannot put in
    words, the zone its fields are read in."""
    return describe_in_words(spec) or f"{spec.zone_name} time"


def overlap_label(overlap: str) -> str:
    """The console's label for an overlap policy."""
    return overlap_policy_label(overlap)


def missed_run_label(on_missed: str, backfill_max: int) -> str:
    """The console's label for a missed-run policy."""
    return label(on_missed, backfill_max)


def _every(interval_ms: int) -> str:
    for size, unit in _UNITS:
        if interval_ms % size == 0:
            count = interval_ms // size
            return f"Every {unit}" if count == 1 else f"Every {count} {unit}s"
    return f"Every {interval_ms} ms"


def _cron(fields: Sequence[ParsedField]) -> str | None:
    second, minute, hour, day_of_month, month, day_of_week = fields
    parts = (
        _time_of_day(second, minute, hour),
        _days(day_of_month, day_of_week),
        _months(month),
    )
    if any(part is None for part in parts):
        return None
    return " ".join(part for part in parts if part)


def _time_of_day(second: ParsedField, minute: ParsedField, hour: ParsedField) -> str | None:
    if len(second.values) > 1:
        every_second = _cycle(second.values, 60, "second")
        if every_second is None or minute.restricted or hour.restricted:
            return None
        return every_second
    (at_second,) = second.values
    if len(minute.values) == 1 and hour.restricted and len(hour.values) <= LISTED_AT_MOST:
        (at_minute,) = minute.values
        return "At " + _joined([_clock(h, at_minute, at_second) for h in sorted(hour.values)])
    within_hour = _within_hour(minute)
    hours = _hours(hour, "during" if within_hour and within_hour.startswith("Every") else "of")
    if within_hour is None or hours is None:
        return None
    seconds = f", at second {at_second}" if at_second else ""
    return " ".join(part for part in (within_hour, hours) if part) + seconds


def _within_hour(minute: ParsedField) -> str | None:
    """ "At minute 5", "Every 5 minutes", "At minutes 0 and 30", or None."""
    return _cycle(minute.values, 60, "minute") or _listed("At minute", "At minutes", minute.values)


def _hours(hour: ParsedField, linked: str) -> str | None:
    if not hour.restricted:
        return "of every hour" if linked == "of" else ""
    step = _step(hour.values, 24)
    if step is not None:
        return f"{linked} every {_ordinal(step)} hour"
    return _listed(f"{linked} hour", f"{linked} hours", hour.values)


def _days(day_of_month: ParsedField, day_of_week: ParsedField) -> str | None:
    """The days it fires on: cron fires on a day that either field names when
    both are restricted, on those of the restricted one otherwise."""
    in_month: str | None = ""
    in_week: str | None = ""
    if day_of_month.restricted:
        days = _listed("on day", "on days", day_of_month.values)
        in_month = None if days is None else f"{days} of the month"
    if day_of_week.restricted:
        in_week = _listed("on", "on", day_of_week.values, _DAYS)
    if in_month is None or in_week is None:
        return None
    return " or ".join(part for part in (in_month, in_week) if part)


def _months(month: ParsedField) -> str | None:
    if not month.restricted:
        return ""
    named = _listed("in", "in", month.values, _MONTHS, first=1)
    step = _step(frozenset(value - 1 for value in month.values), 12)
    return named if named or step is None else f"in every {_ordinal(step)} month"


def _cycle(values: frozenset[int], size: int, unit: str) -> str | None:
    """ "Every minute", "Every 5 minutes": values that repeat evenly through the
    cycle (from 0, a step that divides it); None for any other values."""
    step = _step(values, size)
    if step is None:
        return None
    return f"Every {unit}" if step == 1 else f"Every {step} {unit}s"


def _step(values: frozenset[int], size: int) -> int | None:
    if len(values) < 2:
        return None
    step = size // len(values)
    return step if step * len(values) == size and values == set(range(0, size, step)) else None


def _listed(
    one: str, several: str, values: frozenset[int], names: Sequence[str] = (), first: int = 0
) -> str | None:
    """ "On Mon to Fri" (with a dash), "at minutes 0 and 30": the values as ranges and single
    values, at most LISTED_AT_MOST of them; None for more."""
    ordered = sorted(values)
    runs: list[list[int]] = []
    for value in ordered:
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    shown = (names[value - first] if names else str(value) for value in ordered)
    name_of = dict(zip(ordered, shown, strict=True))
    items: list[str] = []
    for run in runs:
        if len(run) >= 3:
            items.append(f"{name_of[run[0]]}{RANGE_DASH}{name_of[run[-1]]}")
        else:
            items.extend(name_of[value] for value in run)
    if len(items) > LISTED_AT_MOST:
        return None
    return f"{one if len(ordered) == 1 else several} {_joined(items)}"


def _joined(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _clock(hour: int, minute: int, second: int) -> str:
    return f"{hour:02}:{minute:02}" + (f":{second:02}" if second else "")


def _ordinal(number: int) -> str:
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10 if number % 100 not in (11, 12, 13) else 0)
    return f"{number}{suffix or 'th'}"
