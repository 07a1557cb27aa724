"""The memory store keeps what the SQL store keeps: for any history, the same log
(positions, versions, instants, events) and the same read-model rows, compaction
included; the same claims in the same order and the same answers to what a
worker and the gate read (priorities, partitions and fair turns, serial ticks,
pauses, limits, rate windows, start deadlines); and its rows are always the
fold of its own log."""

from __future__ import annotations

import itertools
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from headgate._projections import ALL_PROJECTIONS, JOBS
from headgate._projections.jobs import as_claimed
from headgate._store.memory import MemoryStore
from headgate._store.sql.schema import LIVE
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock
from tests.store.histories import FLOW_OPERATION, OPERATION, play

Rows = dict[str, list[dict[str, Any]]]
_A_CLAIM_WITHOUT_CAPACITY_THEN_A_WIDER_WINDOW = [
    ("rate", "r0", 1, 1_000),
    *[("shaped job", "q", "k", None, None, "r0", 0, None, None)] * 3,
    ("claim", 1),
    ("advance", 999),
    ("rate", "r0", 2, 1_000),
    ("claim", 1),
    ("advance", 1_500),
    ("rate", "r0", 1, 1_000),
    ("claim", 0),
    ("rate", "r0", 3, 3_000),
    ("look", "q"),
    ("claim", 3),
]
"""A claim with no room forgets no rate starts (on SQL it reads no limits), so a
window widened after it still counts them."""
_examples = itertools.count()


def _sql_rows(store: SqlStore) -> Rows:
    rows: Rows = {}
    with store.engine.connect() as connection:
        for projection in ALL_PROJECTIONS:
            table = LIVE.by_name(projection.table)
            found = connection.execute(select(table)).mappings()
            rows[projection.table] = sorted((dict(row) for row in found), key=repr)
    return rows


def _memory_rows(store: MemoryStore) -> Rows:
    return {
        name: sorted((asdict(row) for _, row in table.items()), key=repr)
        for name, table in store.state.tables.items()
    }


def _folded(store: MemoryStore) -> Rows:
    """The rows a rebuild would make: every projection's fold of the whole log,
    with the claims of the jobs running (no fold makes a claim)."""
    tables: dict[str, dict[Any, Any]] = {p.table: {} for p in ALL_PROJECTIONS}
    for recorded in store.log.read_all(0, 1_000_000):
        for projection in ALL_PROJECTIONS:
            key = projection.key(recorded)
            if key is not None:
                row = projection.apply(tables[projection.table].get(key), recorded)
                tables[projection.table][key] = row
    live_jobs = store.state.tables[JOBS.table]
    tables[JOBS.table] = {
        key: as_claimed(asdict(row), asdict(live) if (live := live_jobs.get(key)) else None)
        for key, row in tables[JOBS.table].items()
        if row is not None
    }
    return {
        name: sorted(
            (row if isinstance(row, dict) else asdict(row) for row in rows.values() if row),
            key=repr,
        )
        for name, rows in tables.items()
    }


def _plays_the_same(tmp_path: Path, operations: list[tuple[Any, ...]]) -> None:
    """The same answers, log and rows from memory and SQLite, and rows that are
    the memory store's fold of its own log."""
    sql = SqlStore(f"sqlite:///{tmp_path / f'h{next(_examples)}.db'}", FakeClock())
    memory = MemoryStore(FakeClock())
    try:
        assert play(memory, "", operations) == play(sql, "", operations)
        assert memory.log.read_all(0, 100_000) == sql.log.read_all(0, 100_000)
        assert memory.log.head() == sql.log.head()
        assert _memory_rows(memory) == _sql_rows(sql)
        assert _memory_rows(memory) == _folded(memory)
    finally:
        sql.close()
        memory.close()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=st.lists(OPERATION, min_size=1, max_size=40))
def test_memory_keeps_what_sqlite_keeps(tmp_path: Path, operations: list[tuple[Any, ...]]) -> None:
    _plays_the_same(tmp_path, operations)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=st.lists(FLOW_OPERATION, min_size=10, max_size=60))
@example(operations=_A_CLAIM_WITHOUT_CAPACITY_THEN_A_WIDER_WINDOW)
def test_memory_claims_what_sqlite_claims(
    tmp_path: Path, operations: list[tuple[Any, ...]]
) -> None:
    _plays_the_same(tmp_path, operations)
