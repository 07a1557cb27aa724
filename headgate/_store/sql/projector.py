"""Applies projections (pure folds) to their tables, in bulk.

For a batch of recorded events the projector loads every row the batch
touches in one query per projection, folds the events in log order, and
writes back only what changed: inserts, updates and deletes each as one
executemany. That keeps the cost per batch, not per event, in round trips.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any, Final, TypeVar

from sqlalchemy import Table, delete, select
from sqlalchemy.engine import Connection

from headgate._domain.events import RecordedEvent
from headgate._projections import AnyProjection
from headgate._store.sql.backends import dialect_of
from headgate._store.sql.projection_tables import ProjectionTables
from headgate._store.sql.schema import projection_checkpoints

CHUNK: Final = 500
Row = TypeVar("Row")


class Projector:
    def __init__(self, tables: ProjectionTables, projections: Sequence[AnyProjection]) -> None:
        self.tables = tables
        self.projections = tuple(projections)

    def has_table(self, table: str) -> bool:
        """Whether some projection here keeps `table` live (a store may be opened
        with fewer projections)."""
        return any(projection.table == table for projection in self.projections)

    def projection_of(self, table: str) -> AnyProjection | None:
        """The projection that keeps `table` live here, if any."""
        return next((p for p in self.projections if p.table == table), None)

    def table_for(self, projection: AnyProjection) -> Table:
        return self.tables.by_name(projection.table)

    def fold_live(
        self,
        connection: Connection,
        recorded: Sequence[RecordedEvent],
        known: Mapping[str, Mapping[Hashable, Any]] | None = None,
        folded: Mapping[str, Collection[int]] | None = None,
    ) -> None:
        """Apply a just-appended batch to every projection's live table. `known`:
        rows the caller read in this transaction and nothing has changed since,
        by table and key (not read again). `folded`: by table, the positions of
        events the caller has already folded into it (left out of its fold).

        EventLog.write refuses to open a live write while a rebuild is in
        progress, so every projection is at the transaction's starting head,
        and with this fold at its end.
        """
        for projection in self.projections:
            rows = None if known is None else known.get(projection.table)
            done = None if folded is None else folded.get(projection.table)
            events = recorded if not done else [e for e in recorded if e.position not in done]
            fold_into_table(connection, projection, self.table_for(projection), events, rows)

    def rebuilding(self, connection: Connection) -> dict[str, int]:
        """Projections being rebuilt, and how far each has folded (name -> position)."""
        rows = connection.execute(
            select(projection_checkpoints.c.name, projection_checkpoints.c.position).where(
                projection_checkpoints.c.rebuilding
            )
        )
        return {str(name): int(position) for name, position in rows}


def fold_into_table(
    connection: Connection,
    projection: AnyProjection,
    table: Table,
    recorded: Iterable[RecordedEvent],
    known: Mapping[Hashable, Any] | None = None,
) -> int:
    """Fold events into `table` with `projection`; returns how many events it used.
    `known`: current rows by key, read in this transaction (the rest are loaded)."""
    relevant: list[tuple[Hashable, RecordedEvent]] = []
    for event in recorded:
        key = projection.key(event)
        if key is not None:
            relevant.append((key, event))
    if not relevant:
        return 0
    created, rest = _split_created(projection, relevant)
    deltas, folded = _split_by_need(projection, rest)
    if deltas:
        rows = [{**changes, projection.key_column: key} for key, changes in deltas.items()]
        dialect_of(connection).bulk_update(connection, table, projection.key_column, rows)
    existing: dict[Hashable, Any] = {}
    if folded and not projection.append_only:
        keys = list(dict.fromkeys(key for key, _ in folded))
        if known:
            existing = {key: known[key] for key in keys if key in known}
            keys = [key for key in keys if key not in existing]
        if keys:
            existing.update(
                load_rows(connection, table, projection.key_column, projection.row_type, keys)
            )
    current: dict[Hashable, Any] = dict(existing)
    for key, event in folded:
        current[key] = projection.apply(current.get(key), event)
    if current or created:
        _write_changes(connection, projection, table, existing, current, created=created)
    return len(relevant)


def _split_created(
    projection: AnyProjection, relevant: list[tuple[Hashable, RecordedEvent]]
) -> tuple[list[dict[str, Any]], list[tuple[Hashable, RecordedEvent]]]:
    """New rows that need no folding (the only event for their key in this batch
    creates them), and every other event."""
    if projection.creates is None:
        return [], relevant
    # An append-only projection's keys are unique: each event is its own row.
    events_per_key = None if projection.append_only else Counter(map(itemgetter(0), relevant))
    created: list[dict[str, Any]] = []
    rest: list[tuple[Hashable, RecordedEvent]] = []
    for key, event in relevant:
        alone = events_per_key is None or events_per_key[key] == 1
        values = projection.creates(event) if alone else None
        if values is None:
            rest.append((key, event))
        else:
            created.append(values)
    return created, rest


def _split_by_need(
    projection: AnyProjection, relevant: list[tuple[Hashable, RecordedEvent]]
) -> tuple[dict[Hashable, dict[str, Any]], list[tuple[Hashable, RecordedEvent]]]:
    """Rows whose events in this batch all say which columns they set (updated
    without loading them), and the events of every other row (loaded and folded)."""
    if projection.changes is None:
        return {}, relevant
    deltas: dict[Hashable, dict[str, Any]] = {}
    needs_row: set[Hashable] = set()
    for key, event in relevant:
        if key in needs_row:
            continue
        delta = projection.changes(event)
        if delta is None:
            needs_row.add(key)
            deltas.pop(key, None)
        else:
            deltas.setdefault(key, {}).update(delta)
    folded = [(key, event) for key, event in relevant if key in needs_row]
    return deltas, folded


def load_rows(
    connection: Connection, table: Table, key_column: str, row_type: type[Row], keys: Iterable[Any]
) -> dict[Any, Row]:
    """Rows of `table` whose `key_column` is in `keys`, as `row_type`, by key."""
    column = table.c[key_column]
    wanted = list(dict.fromkeys(keys))
    rows: dict[Any, Row] = {}
    if len(wanted) == 1:  # a key's equality is an index probe: no planner switches needed
        for row in connection.execute(select(table).where(column == wanted[0])).mappings():
            rows[row[key_column]] = row_type(**row)
        return rows
    dialect = dialect_of(connection)
    with dialect.probing_indexes(connection):
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            query = select(table).where(dialect.is_one_of(column, chunk))
            for row in connection.execute(query).mappings():
                rows[row[key_column]] = row_type(**row)
    return rows


def _write_changes(
    connection: Connection,
    projection: AnyProjection,
    table: Table,
    existing: dict[Hashable, Any],
    current: dict[Hashable, Any],
    *,
    created: list[dict[str, Any]],
) -> None:
    inserts, updates, deletes = list(created), [], []
    for key, row in current.items():
        before = existing.get(key)
        if row is None:
            if before is not None:
                deletes.append(key)
        elif before is None:
            inserts.append(_as_dict(row))
        elif row != before:
            after_values, before_values = _as_dict(row), _as_dict(before)
            changed = {n: v for n, v in after_values.items() if before_values[n] != v}
            changed[projection.key_column] = key
            updates.append(changed)
    # Deletes, then updates, then inserts: a row that gives up a unique value
    # (a job leaving `pending` frees its unique key) must do so before a new row
    # in the same batch takes it.
    key_column = table.c[projection.key_column]
    dialect = dialect_of(connection)
    if deletes:
        with dialect.probing_indexes(connection):
            for start in range(0, len(deletes), CHUNK):
                chunk = deletes[start : start + CHUNK]
                connection.execute(delete(table).where(key_column.in_(chunk)))
    if updates:
        dialect.bulk_update(connection, table, projection.key_column, updates)
    if inserts:
        dialect.bulk_insert(connection, table, inserts)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _as_dict(row: Any) -> dict[str, Any]:
    row_type = type(row)
    names = _FIELD_NAMES.get(row_type)
    if names is None:
        names = _FIELD_NAMES[row_type] = tuple(f.name for f in dataclasses.fields(row))
    return {name: getattr(row, name) for name in names}
