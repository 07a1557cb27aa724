"""Each option's rule, one per sort of value: (field name, value) -> the value
as stored, or a ValidationError naming the field and the rule. The value
objects (`options`) name a rule per field in its `OptionInfo`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Final

from headgate._domain.admission import (
    MAX_KIND_LENGTH,
    MAX_QUEUE_LENGTH,
    MAX_UNIQUE_KEY_LENGTH,
    require_note,
    require_payload,
)
from headgate._domain.limits import partition_key_problem, rate_class_problem
from headgate._domain.missed_runs import MissedRunPolicy
from headgate._domain.names import identifier_problem, label_problem, require
from headgate._domain.overlap import OverlapPolicy
from headgate._domain.spec import MAX_INSTANT_MS, InvalidSpec, parse_spec
from headgate._domain.tick_timing import MAX_JITTER_MS
from headgate._errors import ValidationError
from headgate._json import JsonValue

MAX_ATTEMPTS_LIMIT: Final = 10_000
MAX_TIMEOUT_MS: Final = 7 * 24 * 3600 * 1000
"""A week."""
MAX_BACKFILL: Final = 1000
MAX_SUMMARY_LENGTH: Final = 500
MAX_PRIORITY: Final = 100
"""Priorities run from -MAX_PRIORITY to MAX_PRIORITY; higher is claimed first."""

Check = Callable[[str, Any], Any]
"""A field's rule: (field name, value) -> the value as stored, or ValidationError."""


def integer(name: str, value: object, low: int, high: int, what: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(name, f"must be an integer from {low} to {high}{what}, got {value!r}")
    return value


def optional(check: Check) -> Check:
    def optional(name: str, value: object) -> object:
        return None if value is None else check(name, value)

    return optional


def queue(name: str, value: object) -> str:
    require(name, identifier_problem(value, MAX_QUEUE_LENGTH))
    assert isinstance(value, str)
    return value


def attempts(name: str, value: object) -> int:
    return integer(name, value, 1, MAX_ATTEMPTS_LIMIT)


def timeout_ms(name: str, value: object) -> int:
    return integer(name, value, 1, MAX_TIMEOUT_MS, " ms (a week)")


def priority(name: str, value: object) -> int:
    return integer(name, value, -MAX_PRIORITY, MAX_PRIORITY, " (higher runs first)")


def partition_key(name: str, value: object) -> str:
    require(name, partition_key_problem(value))
    assert isinstance(value, str)
    return value


def rate_class(name: str, value: object) -> str:
    require(name, rate_class_problem(value))
    assert isinstance(value, str)
    return value


MAX_TAGS: Final = 16
MAX_TAG_LENGTH: Final = 64


def tags(name: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ValidationError(name, f"must be a list of tags, got {value!r}")
    if len(value) > MAX_TAGS:
        raise ValidationError(name, f"must hold at most {MAX_TAGS} tags, got {len(value)}")
    for index, tag in enumerate(value):
        require(f"{name}[{index}]", identifier_problem(tag, MAX_TAG_LENGTH))
    return tuple(value)


def instant(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INSTANT_MS:
        raise ValidationError(
            name, f"must be an integer of epoch ms, 0 to {MAX_INSTANT_MS}, got {value!r}"
        )
    return value


def unique_key(name: str, value: object) -> str:
    require(name, label_problem(value, MAX_UNIQUE_KEY_LENGTH))
    assert isinstance(value, str)
    return value


def summary(name: str, value: object) -> str:
    try:
        return require_note(value, MAX_SUMMARY_LENGTH)
    except ValidationError as error:
        raise ValidationError(name, error.rule) from None


def spec(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ValidationError(name, f"must be a string, got {type(value).__name__}")
    try:
        return parse_spec(value).text
    except InvalidSpec as error:
        raise ValidationError(name, str(error)) from None


def kind(name: str, value: object) -> str:
    require(name, label_problem(value, MAX_KIND_LENGTH))
    assert isinstance(value, str)
    return value


def payload(name: str, value: object) -> JsonValue:
    """Plain JSON (its size is a server's setting: the commands check it)."""
    try:
        require_payload(value, sys.maxsize)
    except ValidationError as error:
        raise ValidationError(name, error.rule) from None
    return value


def policy(name: str, value: object) -> MissedRunPolicy:
    if isinstance(value, MissedRunPolicy):
        return value
    choices = [policy.value for policy in MissedRunPolicy]
    if not isinstance(value, str) or value not in choices:
        raise ValidationError(name, f"must be one of {', '.join(choices)}, got {value!r}")
    return MissedRunPolicy(value)


def overlap(name: str, value: object) -> OverlapPolicy:
    if isinstance(value, OverlapPolicy):
        return value
    choices = [policy.value for policy in OverlapPolicy]
    if not isinstance(value, str) or value not in choices:
        raise ValidationError(name, f"must be one of {', '.join(choices)}, got {value!r}")
    return OverlapPolicy(value)


def start_within_ms(name: str, value: object) -> int:
    return integer(name, value, 1, MAX_TIMEOUT_MS, " ms (a week)")


def backfill_max(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(name, f"must be an integer, got {value!r}")
    if not 1 <= value <= MAX_BACKFILL:
        raise ValidationError(name, f"must be between 1 and {MAX_BACKFILL}, got {value}")
    return value


def boolean(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(name, f"must be true or false, got {value!r}")
    return value


def jitter_ms(name: str, value: object) -> int:
    return integer(name, 0 if value is None else value, 0, MAX_JITTER_MS, " (an hour)")
