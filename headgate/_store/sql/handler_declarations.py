"""Handler declarations on SQL: `headgate_handler_declarations` (operational state)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection, Row

from headgate._store.port import DeclaredHandler, HandlerDeclaration, HandlerDeclarations
from headgate._store.sql.database import Database
from headgate._store.sql.schema import handler_declarations

_declarations = handler_declarations
_DEFAULTS = ("queue", "priority", "start_within_ms", "partition_key", "rate_class")
_KEYS = ("kind", "declared_by")


class SqlHandlerDeclarations(HandlerDeclarations):
    def __init__(self, database: Database) -> None:
        self._database = database
        self._clock = database.clock

    def declare(
        self, declared_by: str, host: str, declarations: Collection[HandlerDeclaration]
    ) -> list[DeclaredHandler]:
        chosen = {declaration.kind: declaration for declaration in declarations}
        with self._database.serialised_write("recording handler declarations") as connection:
            self._database.synchronise_clock(connection)
            now = self._clock.now_ms()
            stored = {
                row.declaration.kind: row
                for row in _read(connection, chosen, declared_by)
                if row.declared_by == declared_by
            }
            written = [
                DeclaredHandler(declaration, declared_by, host, now)
                for kind, declaration in sorted(chosen.items())
                if kind not in stored or stored[kind].declaration != declaration
            ]
            dialect = self._database.dialect
            for row in written:
                # Processes of one group starting together each write the row: the
                # last one's stands, and none fails on the other's insert.
                connection.execute(dialect.insert_or_replace(_declarations, _KEYS, _values(row)))
        return written

    def declared(self, kinds: Collection[str] | None = None) -> list[DeclaredHandler]:
        with self._database.reading("reading handler declarations") as connection:
            rows = _read(connection, kinds, None)
        return sorted(rows, key=lambda row: (row.declaration.kind, row.declared_by))


def _read(
    connection: Connection, kinds: Collection[str] | None, declared_by: str | None
) -> list[DeclaredHandler]:
    query = select(_declarations)
    if kinds is not None:
        if not kinds:
            return []
        query = query.where(_declarations.c.kind.in_(sorted(kinds)))
    if declared_by is not None:
        query = query.where(_declarations.c.declared_by == declared_by)
    return [_declared(row) for row in connection.execute(query)]


def _declared(row: Row[Any]) -> DeclaredHandler:
    declaration = HandlerDeclaration(row.kind, **{name: getattr(row, name) for name in _DEFAULTS})
    return DeclaredHandler(declaration, row.declared_by, row.host, row.declared_at_ms)


def _values(row: DeclaredHandler) -> dict[str, object]:
    declaration = row.declaration
    return {
        "kind": declaration.kind,
        "declared_by": row.declared_by,
        **{name: getattr(declaration, name) for name in _DEFAULTS},
        "host": row.host,
        "declared_at_ms": row.declared_at_ms,
    }
