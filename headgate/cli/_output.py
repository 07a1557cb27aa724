"""What the command line prints: tables, key/value lines and JSON documents,
with stored text made safe for a terminal."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

from headgate._domain.read_fields import ReadField, Shape
from headgate._model import Job


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


def print_read(
    fields: Iterable[ReadField], read: object, written: Mapping[str, str | None]
) -> None:
    """Every field of a read (`JOB_READ`, `SCHEDULE_READ`) on a line of its own,
    labelled as the domain labels it, in its order: as `written` writes it where
    it says (None: left out, shown elsewhere), else by its shape."""
    lines = []
    for field in fields:
        if field.name in written:
            text = written[field.name]
            if text is not None:
                lines.append((field.label, text))
        else:
            lines.append((field.label, shown(field, getattr(read, field.name))))
    print_fields(lines)


def shown(field: ReadField, value: object) -> str:
    """A field's value for a person, by its shape."""
    if value is None:
        return "-"
    if field.shape is Shape.INSTANT:
        return iso(value if isinstance(value, int) else None)
    if field.shape is Shape.DURATION:
        return f"{value} ms"
    if field.shape is Shape.FLAG:
        return "yes" if value else "no"
    if field.shape is Shape.JSON:
        return shown_json(value)
    if field.shape is Shape.WORDS and isinstance(value, tuple | list):
        return "; ".join(str(item) for item in value) or "-"
    return str(value)


def made_by(job: Job) -> str:
    """Which schedule made a job: its tick, or its Enqueue now."""
    origin = job.periodic_origin
    if origin is not None:
        return f"{origin.schedule_id}, tick {iso(origin.tick_ms)}"
    if job.run_now_schedule_id is not None:
        return f"{job.run_now_schedule_id} (manual: Enqueue now)"
    return "-"
