"""Human descriptions of specs, for the console ("At 09:00, America/New_York")."""

from __future__ import annotations

from headgate._domain.missed_runs import label
from headgate._domain.spec import CronSpec, EverySpec, ScheduleSpec

_UNITS = ((86_400_000, "day"), (3_600_000, "hour"), (60_000, "minute"), (1_000, "second"))
_DAYS = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")


def describe(spec: ScheduleSpec) -> str:
    if isinstance(spec, EverySpec):
        return _every(spec.interval_ms)
    assert isinstance(spec, CronSpec)
    return f"{_cron(spec)}, {spec.zone_name}"


def missed_run_label(on_missed: str, backfill_limit: int) -> str:
    """The console's label for a missed-run policy."""
    return label(on_missed, backfill_limit)


def _every(interval_ms: int) -> str:
    for size, unit in _UNITS:
        if interval_ms % size == 0:
            count = interval_ms // size
            return f"Every {unit}" if count == 1 else f"Every {count} {unit}s"
    return f"Every {interval_ms} ms"


def _cron(spec: CronSpec) -> str:
    second, minute, hour, day_of_month, month, day_of_week = spec.fields
    single = [len(f.values) == 1 for f in (second, minute, hour)]
    if all(single):
        s, m, h = (next(iter(f.values)) for f in (second, minute, hour))
        when = f"At {h:02}:{m:02}" + (f":{s:02}" if s else "")
    elif single[0] and single[1] and not hour.restricted:
        when = f"At minute {next(iter(minute.values))} of every hour"
    elif single[0] and not minute.restricted and not hour.restricted:
        when = "Every minute"
    else:
        body = spec.text.split(" ", 1)[1] if spec.text.startswith("CRON_TZ=") else spec.text
        return f"Cron {body}"
    days = []
    if day_of_month.restricted:
        days.append(f"on day {day_of_month.text} of the month")
    if day_of_week.restricted:
        names = ", ".join(_DAYS[d] for d in sorted(day_of_week.values))
        days.append(f"on {names}")
    day_text = (
        " or ".join(days) if day_of_month.restricted and day_of_week.restricted else " ".join(days)
    )
    month_text = f" in month {month.text}" if month.restricted else ""
    return " ".join(part for part in (when, day_text) if part) + month_text
