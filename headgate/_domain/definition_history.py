"""A schedule's definition over time: the instants an operator asks about, and
what changed between two definitions, field by field.

A payload may hold secrets, and the change history is read by anyone who may
read the console: a diff says that the payload changed and which of its keys
were added, removed or changed, never a value (a payload that is not an
object shows as its JSON type only). Every other field is shown as it is.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from headgate._domain.options import ScheduleDefinition
from headgate._domain.spec import MAX_INSTANT_MS
from headgate._errors import ValidationError
from headgate._json import JsonValue, canonical_json

__all__ = ["PAYLOAD", "FieldChange", "definition_diff", "parse_instant", "payload_outline"]

PAYLOAD: Final = "payload"
_INSTANT_RULE: Final = (
    "must be an instant: epoch milliseconds (1733356800000) or ISO-8601 with a "
    "UTC offset (2026-12-05T01:00:00Z)"
)


def parse_instant(field: str, value: object) -> int:
    """Epoch ms from what an operator typed: an integer, or ISO-8601 text with an
    offset (a browser's datetime-local, without one, is read as UTC). A
    ValidationError naming `field` for anything else or beyond the calendar."""
    if isinstance(value, bool):
        raise ValidationError(field, _INSTANT_RULE)
    if isinstance(value, int):
        instant = value
    elif isinstance(value, str) and value.strip():
        instant = _instant_of_text(field, value.strip())
    else:
        raise ValidationError(field, _INSTANT_RULE)
    if not 0 <= instant <= MAX_INSTANT_MS:
        raise ValidationError(field, f"must be from 1970 to year 9999, got {value!r}")
    return instant


def _instant_of_text(field: str, text: str) -> int:
    if text.isascii() and text.isdigit():
        return int(text[:20])
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(field, f"{_INSTANT_RULE}, got {text[:64]!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


@dataclass(frozen=True)
class FieldChange:
    """One field that differs: how each side shows (None: the side has no
    definition, or the field is unset)."""

    field: str
    before: str | None
    after: str | None


def definition_diff(
    before: ScheduleDefinition | None, after: ScheduleDefinition | None
) -> list[FieldChange]:
    """The fields that differ, in `SCHEDULE_FIELDS` order; the payload by its
    outline (`payload_outline`) and the keys that changed, never its values."""
    old = before.fields() if before is not None else {}
    new = after.fields() if after is not None else {}
    changes: list[FieldChange] = []
    for name in dict.fromkeys([*old, *new]):
        if name == PAYLOAD:
            change = _payload_change(old.get(name), new.get(name), before, after)
        elif old.get(name) != new.get(name) or (name in old) != (name in new):
            change = FieldChange(name, _shown(old, name), _shown(new, name))
        else:
            change = None
        if change is not None:
            changes.append(change)
    return changes


def _payload_change(
    old: JsonValue,
    new: JsonValue,
    before: ScheduleDefinition | None,
    after: ScheduleDefinition | None,
) -> FieldChange | None:
    if before is not None and after is not None and canonical_json(old) == canonical_json(new):
        return None
    if before is None or after is None:
        return FieldChange(
            PAYLOAD,
            None if before is None else payload_outline(old),
            None if after is None else payload_outline(new),
        )
    return FieldChange(PAYLOAD, payload_outline(old), _changed_keys(old, new))


def payload_outline(payload: JsonValue) -> str:
    """What a payload is without its values: an object's keys, else its JSON type."""
    if isinstance(payload, Mapping):
        keys = ", ".join(sorted(str(key) for key in payload))
        return f"an object with keys {keys}" if keys else "an empty object"
    return f"a JSON {_json_type(payload)}"


def _changed_keys(old: JsonValue, new: JsonValue) -> str:
    """The new payload's outline and, between two objects, which keys came,
    went or took another value (the values themselves never shown)."""
    outline = payload_outline(new)
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return f"{outline} (changed)"
    added = sorted(str(key) for key in new.keys() - old.keys())
    removed = sorted(str(key) for key in old.keys() - new.keys())
    changed = sorted(
        str(key)
        for key in new.keys() & old.keys()
        if canonical_json(new[key]) != canonical_json(old[key])
    )
    said = [
        f"{what}: {', '.join(keys)}"
        for what, keys in (("added", added), ("removed", removed), ("changed", changed))
        if keys
    ]
    return f"{outline} ({'; '.join(said)})"


def _json_type(value: JsonValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array"


def _shown(fields: Mapping[str, Any], name: str) -> str | None:
    if name not in fields or fields[name] is None:
        return None
    value = fields[name]
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value)
