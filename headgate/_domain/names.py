"""Names a caller gives and operators read: the one rule for each sort of name.

Every name Headgate stores and shows is checked here when it is introduced,
by every path that introduces one (Python, the API, the CLI, and the console,
which calls the API):

- identifiers (schedule ids, queues): ASCII letters, digits and `. _ : -`,
  starting with a letter or digit. They travel as they are in URLs, stream
  ids, log fields and metric labels.
- labels (job kinds, unique keys, idempotency keys): any printable text that
  neither starts nor ends with a space. Refused: every character of Unicode's
  "Other" and "Separator" categories except the ASCII space, which is exactly
  what `str.isprintable()` refuses. Cc (newline, tab, ESC, DEL, the C1
  controls) breaks lines in logs and tables and drives terminals; Cf (zero
  width space and joiners, bidirectional overrides, the byte order mark, the
  soft hyphen) is invisible, so two different names look the same, and the
  bidirectional controls reorder what is shown around them; Zl and Zp are line
  breaks, and Zs other than U+0020 (the no-break and ideographic spaces) is a
  space that is not one; Cs (lone surrogates) has no UTF-8 and no store takes
  it; Co (private use) and Cn (unassigned) have no agreed glyph. A space at
  either end is invisible too, and an HTTP header (the Idempotency-Key) loses
  it on the way, so a key sent over HTTP and the same key in Python would differ.
  And the text must be in normal form NFC: `café` spelled with a combining
  accent (NFD, as some file systems hand names over) looks the same as the
  composed `café` and would be another name. Look-alike letters of other
  scripts (the Cyrillic U+0430 for a Latin `a`) are not caught: that needs the
  Unicode confusables tables, and every one of them is a visible character.
- fingerprints: 32 lowercase hexadecimal digits, what `ids.fingerprint_of_text`
  makes: anything else can match no job.

A name an earlier build stored that breaks these rules stays readable,
deletable and runnable: lookups take any text a store can hold
(`admission.could_be_stored`), and only a name being introduced is checked.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

from headgate._errors import ValidationError

_IDENTIFIER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\-]*")
IDENTIFIER_RULE: Final = (
    "may contain only letters, digits and . _ : - and must start with a letter or digit"
)
_FINGERPRINT: Final = re.compile(r"[0-9a-f]{32}")
FINGERPRINT_RULE: Final = (
    "must be 32 lowercase hexadecimal digits, as Headgate shows a job's fingerprint "
    "(GET /api/v1/jobs/{id}, headgate jobs show)"
)
_CATEGORY_NAMES: Final = {
    "Cc": "a control character",
    "Cf": "an invisible format character",
    "Cs": "a lone surrogate",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Zs": "a space other than U+0020",
}


def identifier_problem(value: object, max_length: int) -> str | None:
    """The rule an identifier (a schedule id, a queue) breaks, or None."""
    problem = _length_problem(value, max_length)
    if problem is not None:
        return problem
    assert isinstance(value, str)
    if _IDENTIFIER.fullmatch(value):
        return None
    index = next(
        (
            i
            for i, char in enumerate(value)
            if not (char.isascii() and (char.isalnum() or (i and char in "._:-")))
        ),
        0,
    )
    return f"{IDENTIFIER_RULE}; found {describe_char(value[index])} at index {index}"


def label_problem(value: object, max_length: int) -> str | None:
    """The rule a label (a job kind, a unique or idempotency key) breaks, or None."""
    problem = _length_problem(value, max_length)
    if problem is not None:
        return problem
    assert isinstance(value, str)
    problem = invisible_problem(value)
    if problem is not None:
        return problem
    if value[0] == " " or value[-1] == " ":
        return "must not start or end with a space"
    if not value.isascii() and not unicodedata.is_normalized("NFC", value):
        composed = unicodedata.normalize("NFC", value)
        return (
            "must be in Unicode normal form NFC (composed, as text is usually typed): "
            f"write {composed!r}"
        )
    return None


def invisible_problem(text: str) -> str | None:
    """Where `text` holds a control or invisible character (see the module's
    docstring for the set), or None when it holds none."""
    if text.isprintable():
        return None
    index = next(i for i, char in enumerate(text) if not char.isprintable())
    return (
        "must not contain control or invisible characters; "
        f"found {describe_char(text[index])} at index {index}"
    )


def fingerprint_problem(value: object) -> str | None:
    """The rule a quarantine fingerprint breaks, or None."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    return None if _FINGERPRINT.fullmatch(value) else FINGERPRINT_RULE


def describe_char(char: str) -> str:
    """A character as an operator can identify it even when it shows as nothing:
    `U+000A (a control character)`, `U+200B (ZERO WIDTH SPACE)`, `' ' (U+0020)`."""
    code = f"U+{ord(char):04X}"
    if char.isprintable() and not char.isspace():
        return f"{char!r} ({code})"
    name = unicodedata.name(char, "")
    category = _CATEGORY_NAMES.get(unicodedata.category(char), "a space")
    return f"{code} ({name or category})"


def require(field_name: str, problem: str | None) -> None:
    if problem is not None:
        raise ValidationError(field_name, problem)


def _length_problem(value: object, max_length: int) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not 1 <= len(value) <= max_length:
        return f"must be 1-{max_length} characters, got {len(value)}"
    return None
