"""Schedule specifications: `@every:<interval>`, five/six-field cron and its
macros (`@daily`, ...), optional CRON_TZ.

`parse_spec` validates and normalises once; the returned object computes ticks
many times. Every rejection is an `InvalidSpec` whose message quotes the spec
and names the field and the rule, because an operator reads it in the console.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from calendar import monthrange
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from types import MappingProxyType
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from headgate._domain.cron_calendar import CronCalendar
from headgate._domain.cron_fields import (
    DAY_OF_MONTH,
    DAY_OF_WEEK,
    HOUR,
    MINUTE,
    MONTH,
    SECOND,
    CronFieldError,
    FieldRule,
    ParsedField,
    parse_field,
)
from headgate._domain.wallclock import WallClock
from headgate._errors import KeptWhole

MAX_SPEC_LENGTH: Final = 512
MAX_EVERY_MS: Final = 10**12  # about 31.7 years
_EVERY_PREFIX: Final = "@every:"
HOUR_MS: Final = 3_600_000
EVERY_UNITS: Final = MappingProxyType(
    {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
)
"""The units an @every interval may be written in; a bare number is milliseconds.
A day is 86,400,000 ms on the UTC epoch grid, not a calendar day."""
_INTERVAL: Final = re.compile(r"(?P<whole>[0-9]+)(?:\.(?P<fraction>[0-9]+))?(?P<unit>ms|s|m|h|d)?")
_TZ_PREFIX: Final = re.compile(r"^CRON_TZ=(?P<zone>\S*)(?:\s+(?P<rest>.*))?$", re.DOTALL)
MACROS: Final = MappingProxyType(
    {
        "@yearly": "0 0 1 1 *",
        "@annually": "0 0 1 1 *",
        "@monthly": "0 0 1 * *",
        "@weekly": "0 0 * * 0",
        "@daily": "0 0 * * *",
        "@midnight": "0 0 * * *",
        "@hourly": "0 * * * *",
    }
)
"""The cron macros Vixie cron and Kubernetes accept, each read as its five-field
form (which is also what is stored: `@daily` and `0 0 * * *` are one schedule)."""
# The last instant we compute ticks for; datetime cannot go past year 9999.
MAX_INSTANT_MS: Final = 253_402_300_799_999


class InvalidSpec(KeptWhole, ValueError):
    """A schedule specification was rejected; the message says why."""


class ScheduleSpec(ABC):
    """A validated, normalised schedule specification."""

    text: str
    """Canonical form: equal texts mean equal schedules."""

    @property
    @abstractmethod
    def zone_name(self) -> str:
        """The IANA zone the fields are read in ("UTC" when there is none)."""

    @abstractmethod
    def next_tick_ms(self, after_ms: int) -> int:
        """The first tick strictly after `after_ms`."""

    @abstractmethod
    def due_ticks(self, next_run_ms: int, now_ms: int, limit: int) -> list[int]:
        """The newest `limit` ticks in [next_run_ms, now_ms], oldest first."""

    @property
    @abstractmethod
    def shortest_gap_ms(self) -> int:
        """The least time between two of its ticks: exact for @every; for cron, a
        lower bound that is exact up to a minute (all a minimum interval asks)."""

    @property
    @abstractmethod
    def busiest_hour_ticks(self) -> int:
        """The most ticks it makes in any hour: what a schedule costs the store
        at its busiest (the store-wide tick-rate ceiling adds these up)."""

    def fires_like(self, other: ScheduleSpec) -> bool:
        """Whether `other` ticks at exactly the same instants, however it is spelled
        (`1-5` and `MON-FRI`, `00` and `0`, `UTC` and `Etc/UTC`). False when in doubt."""
        return self == other

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, eq=True)
class EverySpec(ScheduleSpec):
    """Ticks at every UTC epoch multiple of `interval_ms`."""

    interval_ms: int
    text: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", f"{_EVERY_PREFIX}{self.interval_ms}")

    @property
    def zone_name(self) -> str:
        return "UTC"

    @property
    def shortest_gap_ms(self) -> int:
        return self.interval_ms

    @property
    def busiest_hour_ticks(self) -> int:
        return -(-HOUR_MS // self.interval_ms)

    def next_tick_ms(self, after_ms: int) -> int:
        _check_instant("after_ms", after_ms)
        return _within_calendar(
            self, after_ms, (after_ms // self.interval_ms + 1) * self.interval_ms
        )

    def due_ticks(self, next_run_ms: int, now_ms: int, limit: int) -> list[int]:
        _check_window(next_run_ms, now_ms, limit)
        if next_run_ms > now_ms:
            return []
        latest = now_ms // self.interval_ms * self.interval_ms
        first_aligned = -(-next_run_ms // self.interval_ms) * self.interval_ms
        oldest = max(first_aligned, latest - (limit - 1) * self.interval_ms)
        return list(range(oldest, latest + 1, self.interval_ms))


class CronSpec(ScheduleSpec):
    """A cron expression read on one zone's wall clock."""

    def __init__(self, text: str, zone: ZoneInfo | None, fields: tuple[ParsedField, ...]) -> None:
        self.text = text
        self.zone = zone
        self.fields = fields
        self._clock = WallClock(zone)
        self._calendar = CronCalendar(fields)

    @property
    def zone_name(self) -> str:
        return "UTC" if self.zone is None else self.zone.key

    @property
    def shortest_gap_ms(self) -> int:
        """Ticks within a minute are its seconds field's neighbours; across two
        minutes that both fire, from its last second to the next minute's first.
        Any other two ticks are more than a minute apart (61 s stands for them)."""
        seconds = sorted(self.fields[0].values)
        minutes = self.fields[1].values
        gaps = [later - earlier for earlier, later in pairwise(seconds)]
        if any((minute + 1) % 60 in minutes for minute in minutes):
            gaps.append(60 - seconds[-1] + seconds[0])
        return min(gaps, default=61) * 1000

    @property
    def busiest_hour_ticks(self) -> int:
        """Its seconds in each of its minutes: every hour it fires in has the
        same minutes, and a wall-clock hour lived twice is two hours of time."""
        return len(self.fields[0].values) * len(self.fields[1].values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CronSpec) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def fires_like(self, other: ScheduleSpec) -> bool:
        return isinstance(other, CronSpec) and self._meaning == other._meaning

    @property
    def _meaning(self) -> tuple[object, ...]:
        # `restricted` is part of it: it decides the day-of-month/day-of-week rule.
        fields = tuple((field.values, field.restricted) for field in self.fields)
        return (self.zone_name, fields)

    def __repr__(self) -> str:
        return f"CronSpec({self.text!r})"

    def next_tick_ms(self, after_ms: int) -> int:
        _check_instant("after_ms", after_ms)
        try:
            tick_ms: int | None = self._next_tick_s(after_ms // 1000) * 1000
        except (OverflowError, ValueError):  # croniter, past the year 9999
            tick_ms = None
        return _within_calendar(self, after_ms, tick_ms)

    def _next_tick_s(self, after_s: int) -> int:
        wall = self._clock.repeated_window_end(after_s)
        wall = self._clock.to_wall(after_s) if wall is None else wall - 1
        while True:
            wall = self._calendar.next_after(wall)
            instant = self._clock.first_instant(wall)
            if instant is None:
                wall = self._clock.gap_bounds(wall)[1] - 1
            elif instant > after_s:
                return instant

    def due_ticks(self, next_run_ms: int, now_ms: int, limit: int) -> list[int]:
        _check_window(next_run_ms, now_ms, limit)
        ticks: list[int] = []
        now_s = now_ms // 1000
        window_end = self._clock.repeated_window_end(now_s)
        wall = self._clock.to_wall(now_s) + 1 if window_end is None else window_end
        while len(ticks) < limit:
            wall = self._calendar.previous_before(wall)
            instant = self._clock.first_instant(wall)
            if instant is None:
                wall = self._clock.gap_bounds(wall)[0]
                continue
            if instant * 1000 < next_run_ms:
                break
            ticks.append(instant * 1000)
        ticks.reverse()
        return ticks


def _within_calendar(spec: ScheduleSpec, after_ms: int, tick_ms: int | None) -> int:
    if tick_ms is None or tick_ms > MAX_INSTANT_MS:
        raise InvalidSpec(f"no tick of {spec.text!r} after {after_ms} before the year 10000")
    return tick_ms


def _check_instant(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int of epoch milliseconds, got {type(value).__name__}")
    if not 0 <= value <= MAX_INSTANT_MS:
        raise ValueError(f"{name} {value} is outside 0..{MAX_INSTANT_MS} epoch milliseconds")


def _check_window(next_run_ms: int, now_ms: int, limit: int) -> None:
    _check_instant("next_run_ms", next_run_ms)
    _check_instant("now_ms", now_ms)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be an int >= 1, got {limit!r}")


def parse_spec(spec: str | ScheduleSpec) -> ScheduleSpec:
    """Validate and normalise a spec; raises InvalidSpec with a readable reason."""
    if isinstance(spec, ScheduleSpec):
        return spec
    if not isinstance(spec, str):
        raise InvalidSpec(f"spec must be a string, got {type(spec).__name__}")
    return _parse_text(" ".join(spec.split()))


@lru_cache(maxsize=4096)
def _parse_text(spec: str) -> ScheduleSpec:
    if not spec:
        raise InvalidSpec("empty spec: expected '@every:<ms>' or a cron expression")
    if len(spec) > MAX_SPEC_LENGTH:
        raise InvalidSpec(f"spec is {len(spec)} characters long; the limit is {MAX_SPEC_LENGTH}")
    zone, body = _split_zone(spec)
    macro = MACROS.get(body)
    if macro is not None:
        return _parse_cron(spec, zone, macro)
    if body.startswith("@"):
        if not body.startswith(_EVERY_PREFIX):
            raise InvalidSpec(
                f"bad spec '{spec}': the @ forms are '@every:<milliseconds>' and the macros "
                f"{', '.join(MACROS)}"
            )
        if zone is not None or spec.startswith("CRON_TZ="):
            raise InvalidSpec(
                f"bad spec '{spec}': @every is always aligned to UTC and rejects a CRON_TZ prefix"
            )
        return _parse_every(spec)
    return _parse_cron(spec, zone, body)


_UTC_NAMES: Final = frozenset(
    ("UTC", "Etc/UTC", "UCT", "Etc/UCT", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu")
)
"""The tz database's names for UTC itself (links to Etc/UTC), all read as plain UTC."""


def _split_zone(spec: str) -> tuple[ZoneInfo | None, str]:
    match = _TZ_PREFIX.match(spec)
    if match is None:
        return None, spec
    name, rest = match.group("zone"), match.group("rest")
    if not name:
        raise InvalidSpec(f"bad time zone in '{spec}': CRON_TZ= needs an IANA zone name")
    if not rest:
        raise InvalidSpec(
            f"bad spec '{spec}': CRON_TZ={name} must be followed by a cron expression"
        )
    return _load_zone(name, spec), rest


def _load_zone(name: str, spec: str) -> ZoneInfo | None:
    if name in _UTC_NAMES:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidSpec(
            f"bad time zone '{name}' in '{spec}': not a known IANA zone name"
        ) from None


def _parse_every(spec: str) -> EverySpec:
    """`@every:30000`, or with a unit: `@every:30s`, `@every:1.5h`. Stored as
    milliseconds (`@every:30000`), so a respelling keeps its phase and its ticks'
    identity. A fraction must come to whole milliseconds (`1.5s`, not `0.5ms`)."""
    text = spec[len(_EVERY_PREFIX) :]
    match = _INTERVAL.fullmatch(text)
    if match is None or (match["fraction"] is not None and match["unit"] is None):
        raise InvalidSpec(
            f"bad @every '{spec}': interval must be a whole number of milliseconds >= 1, "
            f"or a number and a unit: {', '.join(EVERY_UNITS)} (30s, 5m, 1.5h)"
        )
    fraction = match["fraction"] or ""
    scaled = int(match["whole"] + fraction) * EVERY_UNITS[match["unit"] or "ms"]
    interval, remainder = divmod(scaled, 10 ** len(fraction))
    if remainder:
        raise InvalidSpec(f"bad @every '{spec}': {text} is not a whole number of milliseconds")
    if not 1 <= interval <= MAX_EVERY_MS:
        raise InvalidSpec(
            f"bad @every '{spec}': interval {interval} out of range 1-{MAX_EVERY_MS} milliseconds"
        )
    return EverySpec(interval)


_FIVE_FIELD_RULES: Final = (MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK)
_SIX_FIELD_RULES: Final = (SECOND, *_FIVE_FIELD_RULES)
_ZERO_SECONDS: Final = ParsedField(frozenset({0}), restricted=True, text="0")


def _parse_cron(spec: str, zone: ZoneInfo | None, body: str) -> CronSpec:
    texts = body.split(" ")
    rules: tuple[FieldRule, ...]
    if len(texts) == 5:
        rules = _FIVE_FIELD_RULES
    elif len(texts) == 6:
        rules = _SIX_FIELD_RULES
    else:
        raise InvalidSpec(
            f"bad cron '{spec}': expected 5 fields (minute hour day-of-month month "
            f"day-of-week) or 6 (second first), got {len(texts)}"
        )
    try:
        parsed = tuple(parse_field(text, rule) for text, rule in zip(texts, rules, strict=True))
    except CronFieldError as error:
        raise InvalidSpec(f"bad cron '{spec}': {error}") from None
    fields = parsed if len(parsed) == 6 else (_ZERO_SECONDS, *parsed)
    _require_future_occurrence(spec, fields)
    canonical_body = " ".join(field.text for field in parsed)
    canonical = canonical_body if zone is None else f"CRON_TZ={zone.key} {canonical_body}"
    return CronSpec(canonical, zone, fields)


def _require_future_occurrence(spec: str, fields: tuple[ParsedField, ...]) -> None:
    """Reject day/month combinations that never occur (`0 0 31 2 *`).

    With the AND rule a date must exist in some month; any existing date,
    29 February included, falls on every weekday within a 400-year cycle, so
    the weekday cannot make it impossible. With the OR rule a weekday always
    matches.
    """
    day_of_month, month, day_of_week = fields[3], fields[4], fields[5]
    if day_of_month.restricted and day_of_week.restricted:
        return
    longest = {m: monthrange(2000, m)[1] for m in month.values}
    if any(day <= longest[m] for m in month.values for day in day_of_month.values):
        return
    raise InvalidSpec(
        f"bad cron '{spec}': no future occurrence: day-of-month "
        f"{day_of_month.text} never falls in month {month.text}"
    )


def interval_problem(spec: ScheduleSpec, min_interval_ms: int) -> str | None:
    """How `spec` ticks more often than `min_interval_ms` allows, or None."""
    gap = spec.shortest_gap_ms
    if gap >= min_interval_ms:
        return None
    what = (
        f"interval {gap} ms is"
        if isinstance(spec, EverySpec)
        else f"'{spec.text}' ticks as little as {gap} ms apart,"
    )
    return f"{what} below the minimum of {min_interval_ms} ms (RuntimeConfig.min_interval_ms)"


def next_tick_ms(spec: str | ScheduleSpec, after_ms: int) -> int:
    """The first tick of `spec` strictly after `after_ms` (epoch ms, UTC)."""
    return parse_spec(spec).next_tick_ms(after_ms)


def due_ticks(spec: str | ScheduleSpec, next_run_ms: int, now_ms: int, limit: int) -> list[int]:
    """The newest `limit` ticks t with next_run_ms <= t <= now_ms, oldest first.

    Cost grows with `limit`, never with the length of the backlog.
    """
    return parse_spec(spec).due_ticks(next_run_ms, now_ms, limit)
