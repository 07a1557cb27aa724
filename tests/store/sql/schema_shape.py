"""A database's schema as plain data, for comparing two databases exactly.

Read from each backend's own catalogue: tables, and per table its columns
(type as the database reports it, nullability, default), primary key, unique
and check constraints (names and text), and indexes (names, columns,
uniqueness and partial-index predicates, as the database stores them).
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Engine, inspect, text


def schema_shape(engine: Engine) -> dict[str, Any]:
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            return _postgresql(connection)
        return _sqlite(connection)


def _normalised(sql: str | None) -> str | None:
    """Index or constraint text without quoting and spacing differences."""
    if sql is None:
        return None
    sql = sql.replace('"', "").replace(" IF NOT EXISTS", "")
    return re.sub(r"\s+", " ", sql).strip()


def _sqlite(connection: Any) -> dict[str, Any]:
    inspector = inspect(connection)
    shape: dict[str, Any] = {}
    for table in sorted(inspector.get_table_names()):
        columns = connection.execute(text(f'PRAGMA table_info("{table}")')).all()
        indexes = connection.execute(
            text("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = :t"),
            {"t": table},
        ).all()
        shape[table] = {
            "columns": [(c.name, c.type, bool(c.notnull), c.dflt_value, c.pk) for c in columns],
            "unique": sorted(
                (u["name"], tuple(u["column_names"]))
                for u in inspector.get_unique_constraints(table)
            ),
            "checks": sorted(
                (c["name"], _normalised(c["sqltext"]))
                for c in inspector.get_check_constraints(table)
            ),
            "indexes": sorted((name, _normalised(sql)) for name, sql in indexes if sql is not None),
        }
    return shape


def _postgresql(connection: Any) -> dict[str, Any]:
    schema = connection.execute(text("SELECT current_schema()")).scalar_one()
    shape: dict[str, Any] = {}
    tables = connection.execute(
        text("SELECT tablename FROM pg_tables WHERE schemaname = :s ORDER BY tablename"),
        {"s": schema},
    ).scalars()
    for table in tables:
        columns = connection.execute(
            text(
                "SELECT column_name, data_type, character_maximum_length, is_nullable, "
                "column_default FROM information_schema.columns "
                "WHERE table_schema = :s AND table_name = :t ORDER BY ordinal_position"
            ),
            {"s": schema, "t": table},
        ).all()
        constraints = connection.execute(
            text(
                "SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = (quote_ident(:s) || '.' || quote_ident(:t))::regclass "
                "ORDER BY conname"
            ),
            {"s": schema, "t": table},
        ).all()
        indexes = connection.execute(
            text(
                "SELECT indexname, indexdef FROM pg_indexes "
                "WHERE schemaname = :s AND tablename = :t ORDER BY indexname"
            ),
            {"s": schema, "t": table},
        ).all()
        shape[table] = {
            "columns": [tuple(c) for c in columns],
            "constraints": [tuple(c) for c in constraints],
            "indexes": [
                (name, _normalised(definition.replace(f"{schema}.", "")))
                for name, definition in indexes
            ],
        }
    return shape


def differences(left: dict[str, Any], right: dict[str, Any]) -> list[str]:
    """What differs between two shapes, one line per difference, naming the table."""
    found = []
    for table in sorted(left.keys() | right.keys()):
        if table not in left or table not in right:
            found.append(f"{table}: only in {'right' if table not in left else 'left'}")
            continue
        for part in sorted(left[table].keys() | right[table].keys()):
            mine, theirs = left[table].get(part), right[table].get(part)
            if mine != theirs:
                found.append(f"{table}.{part}: {mine} != {theirs}")
    return found
