"""The scheduler's reads stay bounded however many schedules there are.

The due read and the earliest-due read must be served by the partial due
index, on both backends; a condition that does not match the index's predicate
makes the database scan and sort every schedule on every sweep.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Select

from headgate.store.event_store import EventStore
from headgate.store.read_model import due_query, earliest_due_query


@pytest.mark.parametrize(
    "query", [due_query(1_704_067_200_000, 500), earliest_due_query()], ids=["due", "earliest"]
)
def test_the_due_reads_use_the_due_index(store: EventStore, query: Select[object]) -> None:
    with store.engine.connect() as connection:
        compiled = query.compile(connection, compile_kwargs={"literal_binds": True})
        if store.is_postgresql:
            # Tables this small would be scanned anyway; forbid that to learn
            # whether the index can serve the query, in its order.
            connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
            connection.exec_driver_sql("SET LOCAL enable_bitmapscan = off")
            plan = [row[0] for row in connection.exec_driver_sql(f"EXPLAIN {compiled}")]
        else:
            plan = [row[3] for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}")]
    text = " ".join(plan)
    assert "ix_schedules_due_order" in text, text
    assert "TEMP B-TREE" not in text and "Sort" not in text, text
