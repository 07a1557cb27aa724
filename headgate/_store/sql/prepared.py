"""Statements of the hot path, compiled once per dialect and run by the driver.

Building an SQLAlchemy statement, computing its cache key and processing its
parameters cost more, for the few statements a worker's turn or a tick runs,
than the database's own work on them. A `Prepared` statement is built once,
compiled once per dialect, and run on the driver's cursor with plain values;
bound values it was built with are its defaults. That is only correct for
values the drivers take as they are (ints, strings, booleans, None, and the
lists and JSON texts the dialects' batches of keys travel in): true of every
statement made one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection
from sqlalchemy.sql import Executable

from headgate._store.sql.bulk import driver_cursor

if TYPE_CHECKING:
    from headgate._store.sql.backends.dialect import Dialect


@dataclass(frozen=True)
class _Compiled:
    sql: str
    defaults: dict[str, Any]
    required: frozenset[str]
    """The parameters built without a value: each `run` must give them."""
    order: tuple[str, ...] | None
    """Parameter names in placeholder order, for positional paramstyles."""


class Prepared:
    """One statement (its shape fixed; the values named at `run` bound anew)."""

    def __init__(self, statement: Executable) -> None:
        self._statement = statement
        self._compiled: dict[str, _Compiled] = {}
        self._lock = threading.Lock()

    @property
    def statement(self) -> Executable:
        """The statement it was built from (to extend, for a statement run once)."""
        return self._statement

    def run(self, connection: Connection, **values: Any) -> Sequence[tuple[Any, ...]]:
        """Execute it in the connection's transaction; its rows, if it returns any."""
        compiled, parameters = self.bound(connection, **values)
        with driver_cursor(connection, compiled.sql) as cursor:
            cursor.execute(compiled.sql, parameters)
            return cursor.fetchall() if cursor.description is not None else []

    def bound(self, connection: Connection, **values: Any) -> tuple[_Compiled, Any]:
        """Its SQL for this connection's dialect, and the driver's parameters for
        these values (a dict, or a tuple in placeholder order)."""
        compiled = self._compiled_for(connection)
        missing = compiled.required - values.keys()
        if missing:
            raise TypeError(f"values required for {', '.join(sorted(missing))}")
        bound = {**compiled.defaults, **values}
        parameters: Any = (
            bound if compiled.order is None else tuple(bound[name] for name in compiled.order)
        )
        return compiled, parameters

    def _compiled_for(self, connection: Connection) -> _Compiled:
        name = connection.dialect.name
        compiled = self._compiled.get(name)
        if compiled is None:
            with self._lock:
                made = self._statement.compile(dialect=connection.dialect)  # type: ignore[attr-defined]
                order = tuple(made.positiontup) if made.positional else None
                required = frozenset(n for n, bind in made.binds.items() if bind.required)
                defaults = made.construct_params(dict.fromkeys(required))
                compiled = self._compiled[name] = _Compiled(
                    str(made), dict(defaults), required, order
                )
        return compiled


class PreparedPerDialect:
    """A statement whose shape depends on the store's dialect (a batch of keys
    bound as one array or one JSON text: `Dialect.each_of_bound`), built on
    first use on each dialect, then prepared."""

    def __init__(self, build: Callable[[Dialect], Executable]) -> None:
        self._build = build
        self._made: dict[int, Prepared] = {}
        self._lock = threading.Lock()

    def on(self, dialect: Dialect) -> Prepared:
        made = self._made.get(id(dialect))
        if made is None:
            with self._lock:
                made = self._made.setdefault(id(dialect), Prepared(self._build(dialect)))
        return made
