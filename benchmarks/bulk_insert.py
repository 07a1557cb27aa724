"""How the PostgreSQL store inserts a batch of rows: from arrays in one
statement (INSERT ... SELECT FROM unnest) or by COPY ... FROM STDIN, timed on
the rows an enqueue writes (its JobEnqueued event and its job row) for
batches of 2 to 1,000, best of 5 each, in one run. `COPY_FROM_ROWS` (where
the store switches to COPY) is set from this table.

Run: python -m benchmarks.bulk_insert
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, Engine, Table, delete, select

from benchmarks._common import fresh_database, print_table, raw_engine
from benchmarks.scheduler import quiet_json_logs
from headgate import Headgate
from headgate._store.sql.backends.postgresql import COPY_FROM_ROWS, PostgresDialect
from headgate._store.sql.schema import LIVE, events

SIZES = (2, 5, 10, 20, 50, 100, 500, 1000)
TRIALS = 5

Insert = Callable[[Connection, Table, Sequence[dict[str, Any]]], None]


def _best_ms(engine: Engine, insert: Insert, rows: dict[Table, list[dict[str, Any]]]) -> float:
    best = float("inf")
    for _ in range(TRIALS):
        with engine.begin() as connection:
            for table in reversed(rows):
                connection.execute(delete(table))
        with engine.begin() as connection:
            began = time.perf_counter()
            for table, batch in rows.items():
                insert(connection, table, batch)
            best = min(best, time.perf_counter() - began)
    return best * 1000


def main() -> None:
    quiet_json_logs()
    items = [
        {"kind": "import.row", "payload": {"row": n, "file": "a.csv"}} for n in range(max(SIZES))
    ]
    table_rows: list[list[object]] = []
    with fresh_database("postgresql") as url:
        hg = Headgate(url)
        hg.enqueue_many(items)
        hg.close()
        engine = raw_engine(url)
        with engine.connect() as connection:
            event_rows = [dict(row._mapping) for row in connection.execute(select(events))]
            job_rows = [dict(row._mapping) for row in connection.execute(select(LIVE.jobs))]
        dialect = PostgresDialect()
        for size in SIZES:
            rows = {events: event_rows[:size], LIVE.jobs: job_rows[:size]}
            arrays = _best_ms(engine, dialect.insert_from_arrays, rows)
            copied = _best_ms(engine, dialect.copy_rows, rows)
            table_rows.append(
                [f"{size:,}", f"{arrays:.2f}", f"{copied:.2f}", f"{copied / arrays:.2f}"]
            )
        engine.dispose()
    print_table(
        f"A batch of N enqueues' rows (N events and N job rows) inserted in one transaction "
        f"(ms, best of {TRIALS}); the store uses COPY from {COPY_FROM_ROWS} rows",
        ["N", "arrays ms", "COPY ms", "COPY/arrays"],
        table_rows,
    )


if __name__ == "__main__":
    main()
