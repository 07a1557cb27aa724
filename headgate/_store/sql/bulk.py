"""Bulk writes on the hot path, handed straight to the driver.

SQLAlchemy Core processes each row's parameters in Python, which costs more
than the database's own work for the few statements the scheduler runs for
every tick. These compile each statement once per dialect and pass the
driver plain tuples (or dicts). That is only correct for values the drivers
take as they are (ints, strings, booleans, None): true of every column here.
Which of them a backend uses is its dialect's choice (`backends/`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from sqlalchemy import Table, bindparam, insert, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError


@dataclass(frozen=True)
class _Compiled:
    sql: str
    order: tuple[str, ...] | None
    """Parameter names in placeholder order, for positional paramstyles."""

    def parameters(self, rows: Sequence[dict[str, Any]]) -> list[Any]:
        if self.order is None:
            return list(rows)
        return list(map(values_in(self.order), rows))


def values_in(names: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """A row's values as a tuple in `names` order (itemgetter: the loop runs in C)."""
    getter = itemgetter(*names)
    if len(names) == 1:
        return lambda row: (getter(row),)
    return getter


_COMPILED: dict[tuple[str, str, str, tuple[str, ...]], _Compiled] = {}


def executemany_insert(
    connection: Connection, table: Table, rows: Sequence[dict[str, Any]]
) -> None:
    """INSERT every row (all rows have the same keys) in one executemany."""
    if not rows:
        return
    names = tuple(rows[0])
    key = (connection.dialect.name, "insert", table.name, names)
    compiled = _COMPILED.get(key)
    if compiled is None:
        statement = insert(table).values({name: bindparam(name) for name in names})
        compiled = _COMPILED[key] = _compile(connection, statement)
    connection.exec_driver_sql(compiled.sql, compiled.parameters(rows))


def group_by_columns(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, ...], list[dict[str, Any]]]:
    """Rows grouped by which columns they set, so a tick's update binds the six
    columns that changed, not all fifteen."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row), []).append(row)
    return groups


def executemany_update(
    connection: Connection, table: Table, key_column: str, rows: Sequence[dict[str, Any]]
) -> None:
    """UPDATE rows by key, one executemany per group of columns set."""
    for names, group in group_by_columns(rows).items():
        cache_key = (connection.dialect.name, "update", table.name, names)
        compiled = _COMPILED.get(cache_key)
        if compiled is None:
            values: dict[str, Any] = {
                name: bindparam(f"v_{name}") for name in names if name != key_column
            }
            statement = (
                update(table)
                .where(table.c[key_column] == bindparam(f"v_{key_column}"))
                .values(values)
            )
            compiled = _COMPILED[cache_key] = _compile(connection, statement, strip="v_")
        connection.exec_driver_sql(compiled.sql, compiled.parameters(group))


def _compile(connection: Connection, statement: Any, strip: str = "") -> _Compiled:
    """The statement's SQL, and for positional paramstyles the row keys in
    placeholder order (bind names less the `strip` prefix that kept them apart
    from column names)."""
    compiled = statement.compile(dialect=connection.dialect)
    if not compiled.positional:
        if strip:
            raise NotImplementedError("renamed binds need a positional paramstyle")
        return _Compiled(str(compiled), None)
    order = tuple(name.removeprefix(strip) for name in compiled.positiontup)
    return _Compiled(str(compiled), order)


@contextlib.contextmanager
def as_sqlalchemy_errors(connection: Connection, statement: str) -> Iterator[None]:
    """Driver errors raised outside SQLAlchemy's own execute, wrapped as it would,
    so translated_errors maps them like any other."""
    base = connection.dialect.loaded_dbapi.Error
    try:
        yield
    except base as error:
        raise DBAPIError.instance(
            statement, None, error, base, dialect=connection.dialect
        ) from error


@contextlib.contextmanager
def driver_cursor(connection: Connection, statement: str) -> Iterator[Any]:
    """A cursor of the connection's DBAPI connection, closed after the block, its
    errors wrapped as SQLAlchemy's (`as_sqlalchemy_errors`). The DBAPI connection,
    not the driver's own: under an async engine (a host's AsyncConnection, run
    through `run_sync`) it is SQLAlchemy's adapter, whose cursor runs the async
    driver's calls to completion."""
    dbapi = connection.connection.dbapi_connection
    assert dbapi is not None
    with as_sqlalchemy_errors(connection, statement):
        cursor = dbapi.cursor()
        try:
            yield cursor
        finally:
            cursor.close()
