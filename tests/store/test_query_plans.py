"""The scheduler's reads stay bounded however many schedules and jobs there are.

The due read and the earliest-due read must be served by the partial due
index, and compaction's search for expired jobs by the finished-jobs index, on
both backends; a condition that does not match an index's predicate makes the
database scan every row on every sweep (or every compaction).
"""

from __future__ import annotations

import pytest
from sqlalchemy import Select

from headgate.store.compaction import finished_jobs_query
from headgate.store.event_store import EventStore
from headgate.store.read_model import due_query, earliest_due_query


@pytest.mark.parametrize(
    ("query", "index"),
    [
        (due_query(1_704_067_200_000, 500), "ix_schedules_due_order"),
        (earliest_due_query(), "ix_schedules_due_order"),
        (finished_jobs_query(1_704_067_200_000, 500), "ix_jobs_finished"),
    ],
    ids=["due", "earliest", "finished-jobs"],
)
def test_the_bounded_reads_use_their_index(
    store: EventStore, query: Select[object], index: str
) -> None:
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
    assert index in text, text
    assert "TEMP B-TREE" not in text and "Sort" not in text, text
