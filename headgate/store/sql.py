"""Small SQL building blocks shared by the store's queries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, String, Text, any_, literal
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection


def is_one_of(
    connection: Connection, column: ColumnElement[Any], values: Sequence[Any]
) -> ColumnElement[bool]:
    """`column IN (values)`.

    On PostgreSQL, `column = ANY(array)`: one parameter however many values,
    so the statement text is the same for every batch and nothing is rendered
    per value in Python. Strings go as text[]: a cast to varchar(n)[] would
    silently truncate a longer value into a false match.
    """
    if connection.dialect.name == "postgresql":
        element = Text() if isinstance(column.type, String) else column.type
        return column == any_(literal(list(values), ARRAY(element)))
    return column.in_(values)
