"""Small SQL building blocks shared by the store's queries."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, String, Text, any_, func, literal, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection


def is_one_of(
    connection: Connection, column: ColumnElement[Any], values: Sequence[Any]
) -> ColumnElement[bool]:
    """`column IN (values)`, for strings or integers, with one parameter however
    many values: the statement text is the same for every batch and nothing is
    rendered per value in Python.

    On PostgreSQL, `column = ANY(array)`. Strings go as text[]: a cast to
    varchar(n)[] would silently truncate a longer value into a false match.
    On SQLite, the values as one JSON array, unpacked by json_each (an IN
    list is rendered anew, placeholder by placeholder, for every length).
    """
    if connection.dialect.name == "postgresql":
        element = Text() if isinstance(column.type, String) else column.type
        return column == any_(literal(list(values), ARRAY(element)))
    each = func.json_each(literal(json.dumps(list(values)))).table_valued("value")
    return column.in_(select(each.c.value))
