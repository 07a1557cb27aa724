"""Canonical JSON text: one text per value (sorted keys, no spaces).

Payloads are stored, compared and fingerprinted as this text, so equal values
store equal bytes. This is also the one module that reaches into CPython's
`json` internals (`json.encoder.c_make_encoder`), for speed;
`tests/test_dependency_internals.py` fails loudly if an upgrade changes them,
and without them everything here still works through the public encoder.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeAlias

__all__ = ["JsonValue", "canonical_json", "canonical_json_of_plain", "encode_string"]

JsonValue: TypeAlias = Any
"""Any value `json.dumps` accepts; payloads are opaque to Headgate."""

_CANONICAL: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
encode_string: Final[Callable[[str], str]] = json.encoder.encode_basestring
"""A string as JSON text (no ASCII escaping, as in canonical text)."""


def _make_c_encoder() -> Callable[[JsonValue, int], Iterable[str]] | None:
    """CPython's C encoder, made once: JSONEncoder.encode builds a new one on
    every call, which cost more than encoding a typical payload. The arguments
    are c_make_encoder's positional ones (markers, default, encoder, indent,
    key separator, item separator, sort_keys, skipkeys, allow_nan)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    encoder: Callable[[JsonValue, int], Iterable[str]] = make(
        None,  # no cycle bookkeeping (see canonical_json_of_plain)
        _CANONICAL.default,
        encode_string,
        None,
        ":",
        ",",
        True,
        False,
        False,
    )
    return encoder


_canonical_parts: Final = _make_c_encoder()


def canonical_json(value: JsonValue) -> str:
    """The canonical text of any value from outside Headgate.

    Raises TypeError or ValueError (a value that contains itself among them)
    for what is not plain JSON.
    """
    return _CANONICAL.encode(value)


def canonical_json_of_plain(value: JsonValue) -> str:
    """`canonical_json` of a value known to be plain JSON: decoded from JSON, or
    already through the admission gate. The hot path's encoder: it skips the
    bookkeeping that detects a value containing itself, which only input from
    outside can do."""
    if _canonical_parts is None or isinstance(value, str):
        return canonical_json(value)
    return "".join(_canonical_parts(value, 0))
