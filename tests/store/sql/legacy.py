"""Stores as builds before Alembic left them, for upgrade tests.

Those builds kept their tables without the `headgate_` prefix and recorded
their version (1-6) in `schema_migrations`. `make_legacy_store` makes such a
store with the steps those builds ran, holding a current store's rows.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import delete, insert, inspect, select
from sqlalchemy.sql.expression import TableClause, column, table

from headgate._store.sql.engine import create_store_engine
from headgate._store.sql.migrations import legacy as legacy_steps
from headgate._store.sql.schema import LOG, TABLE_PREFIX
from headgate._store.sql.store import SqlStore

LEGACY_PROJECTIONS = ("schedules", "jobs", "enqueue_history", "quarantine")


def legacy(live: TableClause, columns: Collection[str] | None = None) -> TableClause:
    """A live table under the name it had before the prefix (with only `columns`,
    those that table had then, if given)."""
    kept = [c.name for c in live.columns if columns is None or c.name in columns]
    return table(live.name.removeprefix(TABLE_PREFIX), *(column(name) for name in kept))


def make_legacy_store(url: str, version: int = 6, copy_from: SqlStore | None = None) -> None:
    """A store at legacy `version` in the layout of its day, holding `copy_from`'s
    rows (if given) in the tables that version had."""
    engine = create_store_engine(url)
    try:
        with engine.begin() as target:
            legacy_steps.create_at_version(target, version)
            if copy_from is None:
                return
            present = set(inspect(target).get_table_names())
            with copy_from.engine.connect() as source:
                for live in LOG.sorted_tables:
                    name = live.name.removeprefix(TABLE_PREFIX)
                    if name not in present:
                        continue
                    had = {c["name"] for c in inspect(target).get_columns(name)}
                    old = legacy(live, had)
                    query = select(*(live.c[c.name] for c in old.columns))
                    if name == "projection_checkpoints":  # only the projections of its day
                        query = query.where(live.c.name.in_(LEGACY_PROJECTIONS))
                    rows = [dict(row) for row in source.execute(query).mappings()]
                    if name in ("projection_checkpoints", "log_head"):
                        # those builds moved them with the head (which PostgreSQL's
                        # stores of today leave where it was: their positions come
                        # from a sequence)
                        head = copy_from.log.head()
                        rows = [{**row, "position": head} for row in rows]
                    target.execute(delete(old))
                    if rows:
                        target.execute(insert(old), rows)
    finally:
        engine.dispose()
