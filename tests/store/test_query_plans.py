"""The scheduler's reads stay bounded however many schedules and jobs there are.

The due read and the earliest-due read must be served by the partial due
index, and compaction's search for expired jobs by the finished-jobs index, on
both backends; a condition that does not match an index's predicate makes the
database scan every row on every sweep (or every compaction).

The write path's lookups by key must stay index probes on both backends, on
PostgreSQL even while its statistics lag a young or fast-growing table: asked
for a thousand keys at once (`= ANY(array)`), a planner that believes the
table small scanned every event or every pending job, making each tick ten
times dearer a few minutes into a burst. Each key is looked up on its own.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Select, event
from sqlalchemy.engine import Connection

from headgate.domain.events import JobEnqueued
from headgate.domain.streams import job_stream, schedule_stream
from headgate.store import read_model
from headgate.store.compaction import finished_jobs_query
from headgate.store.event_store import NO_STREAM, EventStore, StreamAppend
from headgate.store.read_model import due_query, earliest_due_query
from tests.store.builders import attempted, defined


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


COUNT = 2_000


def _unanalysed_store(store: EventStore) -> None:
    """COUNT schedules, each with one tick's job and record, written at once."""
    store.append_units(
        [
            [StreamAppend(schedule_stream(f"s{n}"), NO_STREAM, (defined(f"s{n}"),))]
            for n in range(COUNT)
        ]
    )
    store.append_units(
        [
            [
                StreamAppend(
                    job_stream(f"j{n}"),
                    NO_STREAM,
                    (JobEnqueued(f"j{n}", "k", "q", {}, f"key-{n}", f"s{n}", 60_000),),
                ),
                StreamAppend(schedule_stream(f"s{n}"), 1, (attempted(f"s{n}", 60_000),)),
            ]
            for n in range(COUNT)
        ]
    )


def test_lookups_by_key_probe_the_index_whatever_the_statistics(store: EventStore) -> None:
    _unanalysed_store(store)
    statements: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        statements.append((statement, parameters))

    wanted = range(0, COUNT, 2)
    with store.write() as transaction:
        event.listen(transaction.connection, "before_cursor_execute", capture)
        transaction.first_events(job_stream(f"next-{n}") for n in wanted)
        transaction.stream_versions(schedule_stream(f"s{n}") for n in wanted)
        read_model.live_jobs_by_unique_key(transaction.connection, (f"key-{n}" for n in wanted))
        event.remove(transaction.connection, "before_cursor_execute", capture)
        lookups = [s for s in statements if any(w in s[0] for w in ("unnest", "json_each"))]
        assert len(lookups) >= 3
        for statement, parameters in lookups:
            plan = _plan(transaction.connection, statement, parameters)
            assert "Seq Scan" not in plan and "SCAN events" not in plan, plan
            assert "SCAN jobs" not in plan and "ix_jobs_queue_state" not in plan, plan


def _plan(connection: Connection, statement: str, parameters: Any) -> str:
    if connection.dialect.name == "postgresql":
        return "\n".join(connection.exec_driver_sql("EXPLAIN " + statement, parameters).scalars())
    rows = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
    return "\n".join(row[3] for row in rows)
