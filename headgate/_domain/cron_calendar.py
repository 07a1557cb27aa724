"""Walks a cron calendar in wall seconds, by way of croniter.

croniter is handed only expressions we have already validated and expanded into
explicit value lists, and only UTC floats, so it never applies its own DST or
field-form rules. It is not thread-safe (it keeps a cursor), hence the lock.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from croniter import croniter

from headgate._domain.cron_fields import ParsedField
from headgate._forksafe import renew_in_forked_children

# A restricted day-of-month AND a weekday can be rare: 29 February on a Monday
# recurs only every 28 years, and across a skipped leap year (2100) more rarely.
_MAX_YEARS_BETWEEN_MATCHES = 400


class CronCalendar:
    """next/previous matching wall second for six parsed fields
    (second, minute, hour, day-of-month, month, day-of-week)."""

    __slots__ = ("__weakref__", "_iterator", "_lock")

    def __init__(self, fields: Sequence[ParsedField]) -> None:
        expression = " ".join(_croniter_fields(fields))
        self._iterator = croniter(
            expression,
            0.0,
            second_at_beginning=True,
            max_years_between_matches=_MAX_YEARS_BETWEEN_MATCHES,
        )
        self._lock = threading.Lock()
        renew_in_forked_children(self)

    def after_fork_in_child(self) -> None:
        self._lock = threading.Lock()

    def next_after(self, wall_s: int) -> int:
        with self._lock:
            return int(self._iterator.get_next(float, start_time=float(wall_s)))

    def previous_before(self, wall_s: int) -> int:
        with self._lock:
            return int(self._iterator.get_prev(float, start_time=float(wall_s)))


def _croniter_fields(fields: Sequence[ParsedField]) -> list[str]:
    """Explicit lists for croniter, with the day rule already decided.

    croniter ORs day-of-month and day-of-week exactly when neither is `*`. We
    decide that rule from how the user wrote the fields, so when the OR would be
    vacuous (one side covers every day) both become `*`, and an unrestricted
    side is always handed over as `*`.
    """
    second, minute, hour, day_of_month, month, day_of_week = fields
    texts = [_as_list(second), _as_list(minute), _as_list(hour)]
    either_day = day_of_month.restricted and day_of_week.restricted
    if either_day and (_covers_every_day_of_month(day_of_month) or len(day_of_week.values) == 7):
        day_texts = ["*", "*"]
    else:
        day_texts = [
            _as_list(day_of_month) if day_of_month.restricted else "*",
            _as_list(day_of_week) if day_of_week.restricted else "*",
        ]
    return [*texts, day_texts[0], _as_list(month), day_texts[1]]


def _covers_every_day_of_month(field: ParsedField) -> bool:
    return len(field.values) == 31


def _as_list(field: ParsedField) -> str:
    return ",".join(str(value) for value in sorted(field.values))
