"""Whole-table snapshots, for asserting that two ways of building projections agree."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from sqlalchemy import Engine, select

from headgate._store.sql.projection_tables import ProjectionTables
from headgate._store.sql.schema import LIVE


def snapshot(engine: Engine, tables: ProjectionTables = LIVE) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every projection table, keyed by the unprefixed table name."""
    result: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as connection:
        for name in (field.name for field in fields(tables)):
            table = tables.by_name(name)
            rows = connection.execute(select(table)).all()
            result[name] = sorted((tuple(row) for row in rows), key=repr)
    return result
