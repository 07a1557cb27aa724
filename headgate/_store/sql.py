"""Small SQL building blocks shared by the store's queries."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import Any, Final

from sqlalchemy import ColumnElement, String, Text, any_, func, literal, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection
from sqlalchemy.sql.selectable import TableValuedAlias
from sqlalchemy.types import TypeEngine

_ARRAY_TYPES: dict[type[TypeEngine[Any]], ARRAY[Any]] = {}


def array_of(element: TypeEngine[Any]) -> ARRAY[Any]:
    """The PostgreSQL array type for a column's values: text[] for any string
    (a cast to varchar(n)[] would silently truncate a longer value into a false
    match). Made once per element type: building a type costs more than the
    hot path's whole query."""
    kind = String if isinstance(element, String) else type(element)
    cached = _ARRAY_TYPES.get(kind)
    if cached is None:
        cached = _ARRAY_TYPES[kind] = ARRAY(Text() if kind is String else kind())
    return cached


def is_one_of(
    connection: Connection, column: ColumnElement[Any], values: Sequence[Any]
) -> ColumnElement[bool]:
    """`column IN (values)`, for strings or integers, with one parameter however
    many values: the statement text is the same for every batch and nothing is
    rendered per value in Python.

    On PostgreSQL, `column = ANY(array)` (see `array_of`).
    On SQLite, the values as one JSON array, unpacked by json_each (an IN
    list is rendered anew, placeholder by placeholder, for every length).
    json_each cuts a string at a NUL: fine for what is looked up this way
    (ids, keys, fingerprints), which the store never holds with one.
    """
    if connection.dialect.name == "postgresql":
        return column == any_(literal(list(values), array_of(column.type)))
    each = func.json_each(literal(json.dumps(list(values)))).table_valued("value")
    return column.in_(select(each.c.value))


def each_of(
    connection: Connection, values: Sequence[Any], like: ColumnElement[Any]
) -> TableValuedAlias:
    """The values as the rows of a one-column table, `wanted.value`, for looking
    each value up on its own (in a correlated or LATERAL subquery).

    A lookup per value is planned as an index probe whatever the table's
    statistics say. With `= ANY(array)` PostgreSQL's planner weighs the whole
    set against its statistics, and while those lag a young or fast-growing
    table (until autovacuum next analyses it) it chose to scan every pending
    job or every event instead: 10 to 20 times slower a few minutes into a
    busy store. One parameter either way, as in `is_one_of`.
    """
    if connection.dialect.name == "postgresql":
        return (
            func.unnest(literal(list(values), array_of(like.type)))
            .table_valued("value")
            .render_derived(name="wanted")
        )
    return func.json_each(literal(json.dumps(list(values)))).table_valued("value").alias("wanted")


_PLANNER_SWITCHES: Final = ("enable_seqscan", "enable_hashjoin", "enable_mergejoin")
_SWITCHES_OFF: Final = (
    "WITH before AS MATERIALIZED (SELECT "
    + ", ".join(f"current_setting('{name}') AS {name}" for name in _PLANNER_SWITCHES)
    + ") SELECT "
    + ", ".join(f"before.{name}, set_config('{name}', 'off', true)" for name in _PLANNER_SWITCHES)
    + " FROM before"
)
"""Reads the switches' values (the CTE is scanned first) and turns them off for
this transaction, in one round trip."""
_SWITCHES_BACK: Final = "SELECT " + ", ".join(
    f"set_config('{name}', %({name})s, true)" for name in _PLANNER_SWITCHES
)


@contextlib.contextmanager
def probing_indexes(connection: Connection) -> Iterator[None]:
    """Statements inside find their rows by index probes on PostgreSQL.

    For statements that touch a batch of keys in a growing table (the log,
    the jobs, the schedules). While the table's statistics lag its growth
    (until autovacuum next analyses it), the planner believes it small and
    reads all of it: a scan, or a hash join with the whole table, on every
    batch. Only for these statements: a write transaction may also compare or
    copy whole tables (verify, replay), which need those plans. The switches
    get back the values they had, whoever set them. SQLite plans by index
    whenever one serves, so there this does nothing.

    Not restored if a statement inside fails: PostgreSQL then refuses every
    statement until the transaction rolls back, which ends the settings too.
    """
    if connection.dialect.name != "postgresql":
        yield
        return
    before = connection.exec_driver_sql(_SWITCHES_OFF).one()
    yield
    values = {name: before[index * 2] for index, name in enumerate(_PLANNER_SWITCHES)}
    connection.exec_driver_sql(_SWITCHES_BACK, values).close()
