"""The write path's lookups stay index probes while PostgreSQL's statistics lag.

Until autovacuum next analyses a young or fast-growing table, the planner
believes it small. Asked for a thousand keys at once (`= ANY(array)`), it then
scanned every event or every pending job: on a store a few minutes into a
burst that made each tick ten times dearer. Each key is looked up on its own
instead, which is planned as an index probe whatever the statistics say.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event

from headgate.domain.events import JobEnqueued
from headgate.domain.streams import job_stream, schedule_stream
from headgate.store import read_model
from headgate.store.event_store import NO_STREAM, EventStore, StreamAppend
from tests.store.builders import attempted, defined

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
    if not store.is_postgresql:
        pytest.skip("SQLite plans these as index lookups without statistics")
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
        lookups = [s for s in statements if "ANY" in s[0] or "unnest" in s[0]]
        assert len(lookups) >= 3
        for statement, parameters in lookups:
            plan = "\n".join(
                transaction.connection.exec_driver_sql("EXPLAIN " + statement, parameters).scalars()
            )
            assert "Seq Scan" not in plan, plan
            assert "ix_jobs_queue_state" not in plan, plan
