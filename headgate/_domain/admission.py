"""Input rules, as pure functions: each rejection names the field and the rule.

Commands check a request with these before they touch the store. The
admission gate (`decisions.decide`) applies the job rules again at write
time, with the limits in force then.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from headgate._domain.cursors import is_clean_text
from headgate._domain.names import (
    fingerprint_problem,
    identifier_problem,
    invisible_problem,
    label_problem,
    require,
)
from headgate._errors import ValidationError
from headgate._json import JsonValue, canonical_json

MAX_KIND_LENGTH: Final = 128
MAX_QUEUE_LENGTH: Final = 128
MAX_ID_LENGTH: Final = 128
MAX_UNIQUE_KEY_LENGTH: Final = 200
MAX_IDEMPOTENCY_KEY_LENGTH: Final = 200
MAX_NOTE_LENGTH: Final = 255
DEFAULT_MAX_PAYLOAD_BYTES: Final = 64 * 1024


@dataclass(frozen=True)
class AdmissionLimits:
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    queue_limits: Mapping[str, int] = field(default_factory=dict)
    """Maximum pending jobs per queue; a queue not listed uses `default_queue_limit`."""
    default_queue_limit: int | None = None
    """None: no backpressure."""

    def limit_for(self, queue: str) -> int | None:
        return self.queue_limits.get(queue, self.default_queue_limit)


def require_name(field_name: str, value: object, max_length: int = MAX_ID_LENGTH) -> str:
    """A new identifier: a schedule's id or a queue (`names.identifier_problem`)."""
    require(field_name, identifier_problem(value, max_length))
    assert isinstance(value, str)
    return value


def kind_problem(value: object) -> str | None:
    """The admission gate's rule for a job's kind, applied to every job at write
    time: any text a kind has ever been allowed to be (printable, 1-128
    characters), so a schedule stored by an earlier build keeps ticking. A new
    kind is held to `require_kind`, which also refuses a space at either end."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not 1 <= len(value) <= MAX_KIND_LENGTH:
        return f"must be 1-{MAX_KIND_LENGTH} characters, got {len(value)}"
    return invisible_problem(value)


def require_kind(value: object) -> str:
    """A new job kind (a schedule's, a handler's, an enqueue's): `names.label_problem`."""
    require("kind", label_problem(value, MAX_KIND_LENGTH))
    assert isinstance(value, str)
    return value


def require_fingerprint(value: object) -> str:
    """A fingerprint to quarantine: the form `ids.fingerprint_of_text` makes."""
    require("fingerprint", fingerprint_problem(value))
    assert isinstance(value, str)
    return value


def payload_problem(size_bytes: int, max_bytes: int) -> str | None:
    """The size rule a payload's canonical JSON text breaks, or None."""
    if size_bytes > max_bytes:
        return f"is {size_bytes} bytes as JSON; the limit is {max_bytes}"
    return None


def require_payload(value: JsonValue, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> str:
    """The payload's canonical JSON text; it must be plain JSON within the size limit."""
    try:
        text = canonical_json(value)
    except (TypeError, ValueError) as error:
        raise ValidationError(
            "payload",
            f"must be plain JSON (objects, arrays, strings, finite numbers, booleans, null): "
            f"{error}",
        ) from None
    except RecursionError:
        raise ValidationError("payload", "is nested too deeply to store as JSON") from None
    _require_string_keys(value)
    try:
        size = len(text.encode())
    except UnicodeEncodeError:
        raise ValidationError("payload", "contains text that is not valid Unicode") from None
    problem = payload_problem(size, max_bytes)
    if problem is not None:
        raise ValidationError("payload", problem)
    return text


def _require_string_keys(value: JsonValue) -> None:
    """JSON object keys are strings; json.dumps would quietly turn 1 into "1"
    (and None into "null"), storing a payload the caller never sent."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, str):
                    raise ValidationError(
                        "payload", f"object keys must be strings, got {type(key).__name__} {key!r}"
                    )
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)


def require_note(value: object, max_length: int) -> str:
    """Free text for operators (a quarantine note): printable, possibly empty."""
    if not isinstance(value, str):
        raise ValidationError("note", f"must be a string, got {type(value).__name__}")
    if len(value) > max_length:
        raise ValidationError("note", f"must be at most {max_length} characters, got {len(value)}")
    require("note", invisible_problem(value))  # lone surrogates too, which no store holds
    return value


def require_optional_key(field_name: str, value: object, max_length: int) -> str | None:
    """A new unique or idempotency key, or None: `names.label_problem`."""
    if value is None:
        return None
    require(field_name, label_problem(value, max_length))
    assert isinstance(value, str)
    return value


def check_limit(limit: int, maximum: int) -> None:
    """A page size: an integer from 1 to `maximum`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= maximum:
        raise ValidationError("limit", f"must be an integer between 1 and {maximum}, got {limit!r}")


MAX_STORED_ID_LENGTH: Final = 255


def could_be_stored(identifier: object) -> bool:
    """Ids a store could hold. Anything else (NUL, lone surrogates, over-long) is
    simply absent: no query is sent with text the database would reject."""
    return isinstance(identifier, str) and is_clean_text(identifier, MAX_STORED_ID_LENGTH)
