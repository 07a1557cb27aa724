"""A read type made from a projection row: the fields both name are copied as
they are, so a field added to both (an option and its column) needs no line
in any `from_row`."""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any


@cache
def _shared(read: type[Any], row: type[Any]) -> tuple[str, ...]:
    mine = {f.name for f in dataclasses.fields(read)}
    return tuple(f.name for f in dataclasses.fields(row) if f.name in mine)


def same_named(row: Any, read: type[Any]) -> dict[str, Any]:
    """The values of `row`'s fields that the dataclass `read` has too, by name."""
    return {name: getattr(row, name) for name in _shared(read, type(row))}
