"""The grammar of one cron field, turned into an explicit set of values.

We parse fields ourselves instead of trusting croniter's parser: croniter accepts
forms that do not mean what they say (hashed `H`, `L`, steps that silently wrap),
and its errors do not name the field. Everything after this module works on
explicit value sets, so the meaning of a spec is decided here and only here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

MONTH_NAMES: Final = MappingProxyType(
    {
        name: number
        for number, name in enumerate(
            ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
            start=1,
        )
    }
)
DAY_NAMES: Final = MappingProxyType(
    {name: number for number, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
)


class CronFieldError(ValueError):
    """A field is malformed; the message names the field and the rule it breaks."""


@dataclass(frozen=True)
class FieldRule:
    """What one cron field accepts.

    `star_high` is the top of `*` and open-ended steps; it differs from `high` only
    for day-of-week, where 7 is accepted as an alias of Sunday but `*/2` must not
    produce it a second time.
    """

    name: str
    low: int
    high: int
    star_high: int
    names: MappingProxyType[str, int] = field(default_factory=lambda: MappingProxyType({}))
    allows_question_mark: bool = False

    def normalise(self, value: int) -> int:
        return 0 if self.name == "day-of-week" and value == 7 else value


SECOND = FieldRule("second", 0, 59, 59)
MINUTE = FieldRule("minute", 0, 59, 59)
HOUR = FieldRule("hour", 0, 23, 23)
DAY_OF_MONTH = FieldRule("day-of-month", 1, 31, 31, allows_question_mark=True)
MONTH = FieldRule("month", 1, 12, 12, names=MONTH_NAMES)
DAY_OF_WEEK = FieldRule("day-of-week", 0, 7, 6, names=DAY_NAMES, allows_question_mark=True)

_ELEMENT = re.compile(r"^(?P<base>\*|[A-Za-z0-9]+(?:-[A-Za-z0-9]+)?)(?:/(?P<step>[^/]*))?$")


@dataclass(frozen=True)
class ParsedField:
    """The values a field matches, and whether it was written as a restriction.

    `restricted` is False only for a bare `*` or `?`; it decides the
    day-of-month / day-of-week OR rule, which looks at how a field is written,
    not at which values it happens to cover.
    """

    values: frozenset[int]
    restricted: bool
    text: str


def parse_field(text: str, rule: FieldRule) -> ParsedField:
    """Parse one field's text against its rule, or raise CronFieldError."""
    if text in ("*", "?"):
        if text == "?" and not rule.allows_question_mark:
            raise CronFieldError(f"{rule.name} '?' is only allowed in day-of-month and day-of-week")
        values = frozenset(range(rule.low, rule.star_high + 1))
        return ParsedField(values, restricted=False, text="*")
    values_set: set[int] = set()
    for element in text.split(","):
        values_set.update(_parse_element(element, rule))
    return ParsedField(frozenset(values_set), restricted=True, text=text.upper())


def _parse_element(element: str, rule: FieldRule) -> set[int]:
    if element == "":
        raise CronFieldError(f"{rule.name} has an empty list element")
    match = _ELEMENT.match(element)
    if match is None:
        raise CronFieldError(f"{rule.name} '{element}' is not a value, range a-b, list or step */n")
    base, step_text = match.group("base"), match.group("step")
    step = 1 if step_text is None else _parse_step(step_text, rule)
    if base == "*":
        low, high = rule.low, rule.star_high
    elif "-" in base:
        first, last = base.split("-")
        low, high = _parse_value(first, rule), _parse_value(last, rule)
        if low > high:
            raise CronFieldError(f"{rule.name} range {base} is descending")
    else:
        low = _parse_value(base, rule)
        high = low if step_text is None else max(low, rule.star_high)
    return {rule.normalise(value) for value in range(low, high + 1, step)}


def _parse_step(text: str, rule: FieldRule) -> int:
    if not text.isdigit() or not text.isascii():
        raise CronFieldError(f"{rule.name} step '{text}' is not a whole number")
    step = int(text)
    span = rule.star_high - rule.low + 1
    if step == 0:
        raise CronFieldError(f"{rule.name} step 0 must be at least 1")
    if step > span:
        raise CronFieldError(f"{rule.name} step {step} exceeds the field's {span} values")
    return step


def _parse_value(text: str, rule: FieldRule) -> int:
    if text.isascii() and text.isdigit():
        value = int(text)
    elif text.upper() in rule.names:
        value = rule.names[text.upper()]
    elif rule.names:
        raise CronFieldError(f"{rule.name} '{text}' is not a number or a {rule.name} name")
    else:
        raise CronFieldError(f"{rule.name} '{text}' is not a number")
    if not rule.low <= value <= rule.high:
        raise CronFieldError(f"{rule.name} {value} out of range {rule.low}-{rule.high}")
    return value
