"""A read type made from a projection row: the fields both name are copied as
they are, so a field added to both (an option and its column) needs no line
in any `from_row`."""

from __future__ import annotations

import dataclasses
from typing import Any

_SHARED: dict[tuple[type[Any], type[Any]], tuple[str, ...]] = {}


def _shared(read: type[Any], row: type[Any]) -> tuple[str, ...]:
    found = _SHARED.get((read, row))
    if found is None:
        mine = {f.name for f in dataclasses.fields(read)}
        found = tuple(f.name for f in dataclasses.fields(row) if f.name in mine)
        _SHARED[(read, row)] = found
    return found


def same_named(row: Any, read: type[Any]) -> dict[str, Any]:
    """The values of `row`'s fields that the dataclass `read` has too, by name."""
    return {name: getattr(row, name) for name in _shared(read, type(row))}
