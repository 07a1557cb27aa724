"""Opaque paging cursors.

A cursor is base64url JSON naming what it pages and where it stopped, so a
client cannot build one by accident and a cursor from one list is rejected by
another with a clear message instead of a wrong page.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Final

from headgate._errors import ValidationError

MAX_CURSOR_LENGTH = 512
_RULE: Final = "is not a cursor returned by this list; pass next_cursor back unchanged"
_MS: Final = re.compile(r"[0-9]{1,19}")
"""A time in a cursor: ASCII digits only (`str.isdigit` takes "²", which `int` refuses)."""
MAX_PAGE: Final = 200
"""The most items a listing's page holds (the enqueue history: 100, all it shows)."""

SCHEDULES_CURSOR: Final = "schedules"
JOBS_CURSOR: Final = "jobs"
QUARANTINE_CURSOR: Final = "quarantine"
HISTORY_CURSOR: Final = "enqueue-events"
RUNS_CURSOR: Final = "runs"
"""What each listing's cursors name, so one list's cursor is refused by another."""


def encode_cursor(kind: str, position: int | str) -> str:
    raw = json.dumps([kind, position], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(kind: str, cursor: str, position_type: type[int] | type[str]) -> int | str:
    """The position of a cursor `encode_cursor` made for `kind`; anything else,
    whatever a client crafted, is ValidationError("cursor", ...), never a
    store's error: an integer position is within 0..2**63-1."""
    if not isinstance(cursor, str) or not 0 < len(cursor) <= MAX_CURSOR_LENGTH:
        raise ValidationError("cursor", _RULE)
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        decoded = json.loads(raw)
    except (binascii.Error, ValueError, RecursionError):
        raise ValidationError("cursor", _RULE) from None
    if (
        not isinstance(decoded, list)
        or len(decoded) != 2
        or decoded[0] != kind
        or type(decoded[1]) is not position_type
        or not _storable(decoded[1])
    ):
        raise ValidationError("cursor", _RULE)
    position: int | str = decoded[1]
    return position


def encode_timed_cursor(kind: str, at_ms: int, key: str) -> str:
    """The cursor of a newest-first list ordered by (a time, an id): "ms:id"."""
    return encode_cursor(kind, f"{at_ms}:{key}")


def decode_timed_cursor(kind: str, cursor: str) -> tuple[int, str]:
    """(time, id) of a cursor `encode_timed_cursor` made for `kind`: the time
    ASCII digits within a 64-bit integer, the id not empty."""
    position = str(decode_cursor(kind, cursor, str))
    at_ms, _, key = position.partition(":")
    if _MS.fullmatch(at_ms) is None or int(at_ms) >= 2**63 or not key:
        raise ValidationError("cursor", _RULE)
    return int(at_ms), key


def _storable(value: int | str) -> bool:
    """A value both databases can compare: a 64-bit integer not negative (an
    event id), or clean UTF-8 text."""
    if isinstance(value, int):
        return 0 <= value < 2**63
    return is_clean_text(value, 255)


def is_clean_text(value: str, max_length: int) -> bool:
    """Text without NUL or lone surrogates, which PostgreSQL or SQLite cannot store."""
    if len(value) > max_length or "\x00" in value:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True
