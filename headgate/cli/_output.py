"""What the command line prints: tables, key/value lines and JSON documents,
with stored text made safe for a terminal."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime


def print_json(body: object) -> None:
    """One JSON document; a pydantic model is dumped as the API would send it
    (unset optional fields, such as a schedule's payload, left out)."""
    dump = getattr(body, "model_dump", None)
    if dump is not None:
        body = dump(mode="json", exclude_unset=True)
    print(json.dumps(body, indent=2, sort_keys=False))


def iso(ms: int | None) -> str:
    """An instant as ISO 8601 UTC, to the millisecond when it has one."""
    if ms is None:
        return "-"
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    spec = "seconds" if ms % 1000 == 0 else "milliseconds"
    return moment.isoformat(timespec=spec).replace("+00:00", "Z")


def printable(text: str) -> str:
    """`text` with control and other unprintable characters escaped, so stored
    text (an error message, a payload) cannot move the cursor or span lines."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def printable_json(text: str) -> str:
    """JSON text with its unprintable characters (C1 controls, bidi overrides,
    which a JSON encoder leaves as they are) written as JSON's own escapes: the
    same document, safe for a terminal. Outside its strings JSON holds none."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _json_escape(c) for c in text)


def _json_escape(character: str) -> str:
    code = ord(character)
    if code < 0x10000:
        return f"\\u{code:04x}"
    high, low = divmod(code - 0x10000, 0x400)
    return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"


def print_fields(fields: Iterable[tuple[str, str]]) -> None:
    for name, value in fields:
        print(f"{name + ':':<15} {printable(value)}")


def print_table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], *, empty: str, indent: str = ""
) -> None:
    cells = [[printable(cell) for cell in row] for row in rows]
    if not cells:
        print(empty)
        return
    widths = [max(len(row[i]) for row in [list(headers), *cells]) for i in range(len(headers))]
    for row in [list(headers), *cells]:
        print(
            indent
            + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def shown_json(value: object) -> str:
    """A stored JSON value (a payload, a result) on one line, keys sorted."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
