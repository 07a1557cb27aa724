"""Event log benchmarks, on SQLite and PostgreSQL, printed as tables.

1. Appends per second, single events (one transaction each) and batches (500
   per transaction), as a ratio to a raw SQLAlchemy insert of the same rows
   into a plain table in the same database, measured in the same run.
2. Rebuild speed in events per second over a log of N events (default 1M).
3. Storage: one schedule ticked 100,000 times with compaction every 1,000
   ticks; database size at 10k, 50k and 100k ticks.

Run: python -m benchmarks.event_log [--events N] [--ticks N] [--backend sqlite|postgresql]
"""

from __future__ import annotations

import argparse
import time

from sqlalchemy import BigInteger, Column, Integer, MetaData, String, Table, Text, insert, text

from benchmarks._common import fresh_database, print_table
from headgate._domain.events import (
    EnqueueAttempted,
    JobEnqueued,
    JobFinished,
    JobState,
    Outcome,
    ScheduleDefined,
)
from headgate._domain.options import JobOptions, ScheduleDefinition
from headgate._domain.streams import job_stream, schedule_stream
from headgate._store.mapper import encode
from headgate._store.port import NO_STREAM, CompactionPolicy, StreamAppend
from headgate._store.sql.compaction import compact
from headgate._store.sql.maintenance import rebuild
from headgate._store.sql.schema import events as events_table
from headgate._store.sql.store import SqlStore
from headgate.testing import FakeClock

BATCH = 500


def _job(n: int) -> JobEnqueued:
    return JobEnqueued(f"bench-{n}", "email.send", {"n": n}, JobOptions(queue="default"))


def _raw_table() -> Table:
    return Table(
        "raw_events",
        MetaData(),
        Column("position", BigInteger, primary_key=True, autoincrement=False),
        Column("stream_id", String(255), nullable=False),
        Column("version", Integer, nullable=False),
        Column("type", String(64), nullable=False),
        Column("schema_version", Integer, nullable=False),
        Column("body", Text, nullable=False),
        Column("recorded_at_ms", BigInteger, nullable=False),
    )


def _raw_row(position: int, event: JobEnqueued) -> dict[str, object]:
    type_name, version, body = encode(event)
    return {
        "position": position,
        "stream_id": job_stream(event.job_id),
        "version": 1,
        "type": type_name,
        "schema_version": version,
        "body": body,
        "recorded_at_ms": 0,
    }


def append_rates(backend: str, singles: int, batches: int) -> list[list[object]]:
    with fresh_database(backend) as url:
        store = SqlStore(url, FakeClock())
        raw = _raw_table()
        raw.create(store.engine)

        began = time.perf_counter()
        for n in range(singles):
            store.log.append(job_stream(f"bench-{n}"), NO_STREAM, [_job(n)])
        ours_single = singles / (time.perf_counter() - began)

        began = time.perf_counter()
        for n in range(singles):
            with store.engine.begin() as connection:
                connection.execute(insert(raw), [_raw_row(n + 1, _job(n))])
        raw_single = singles / (time.perf_counter() - began)

        offset = singles
        began = time.perf_counter()
        for b in range(batches):
            start = offset + b * BATCH
            units = [
                [StreamAppend(job_stream(f"bench-{n}"), NO_STREAM, (_job(n),))]
                for n in range(start, start + BATCH)
            ]
            store.log.append_units(units)
        ours_batch = batches * BATCH / (time.perf_counter() - began)

        began = time.perf_counter()
        for b in range(batches):
            start = offset + b * BATCH
            rows = [_raw_row(n + 1, _job(n)) for n in range(start, start + BATCH)]
            with store.engine.begin() as connection:
                connection.execute(insert(raw), rows)
        raw_batch = batches * BATCH / (time.perf_counter() - began)
        store.close()
    return [
        [
            backend,
            "single (1/txn)",
            f"{ours_single:,.0f}",
            f"{raw_single:,.0f}",
            f"{ours_single / raw_single:.2f}",
        ],
        [
            backend,
            f"batch ({BATCH}/txn)",
            f"{ours_batch:,.0f}",
            f"{raw_batch:,.0f}",
            f"{ours_batch / raw_batch:.2f}",
        ],
    ]


def _settled(schedule_id: str, tick: int, job_id: str, next_run_ms: int) -> EnqueueAttempted:
    """An enqueued tick's record, carrying the advance, as the scheduler writes it."""
    return EnqueueAttempted(
        schedule_id, tick, job_id, Outcome.ENQUEUED, "accepted", 1, None, next_run_ms, tick
    )


def _tick_units(
    schedule_id: str, first_tick: int, count: int, version: int
) -> list[list[StreamAppend]]:
    units = []
    for n in range(count):
        tick = (first_tick + n) * 1000
        job_id = f"{schedule_id}-{tick}"
        options = JobOptions(queue="default")
        job = JobEnqueued(job_id, "report.build", {"team": 7}, options, schedule_id, tick)
        attempt = _settled(schedule_id, tick, job_id, tick + 1000)
        units.append(
            [
                StreamAppend(job_stream(job_id), NO_STREAM, (job,)),
                StreamAppend(schedule_stream(schedule_id), version + n, (attempt,)),
            ]
        )
    return units


def rebuild_rate(backend: str, total_events: int) -> list[object]:
    """Write a log of schedule ticks straight into the events table, then rebuild."""
    schedules = 1000
    with fresh_database(backend) as url:
        store = SqlStore(url, FakeClock())
        rows: list[dict[str, object]] = []
        position = 0
        versions = dict.fromkeys(range(schedules), 0)

        def add(stream: str, version: int, event: object) -> None:
            nonlocal position
            position += 1
            type_name, schema_version, body = encode(event)  # type: ignore[arg-type]
            rows.append(
                {
                    "position": position,
                    "stream_id": stream,
                    "version": version,
                    "type": type_name,
                    "schema_version": schema_version,
                    "body": body,
                    "recorded_at_ms": position,
                }
            )

        def flush() -> None:
            with store.engine.begin() as connection:
                connection.execute(insert(events_table), rows)
                connection.execute(text("UPDATE log_head SET position = :p"), {"p": position})
            rows.clear()

        for s in range(schedules):
            versions[s] = 1
            add(schedule_stream(f"s{s}"), 1, _definition(f"s{s}"))
        tick = 0
        while position < total_events:
            tick += 1
            for s in range(schedules):
                sid, t = f"s{s}", tick * 60_000
                job_id = f"{sid}-{t}"
                add(
                    job_stream(job_id),
                    1,
                    JobEnqueued(job_id, "k", {"s": s}, JobOptions(queue="default"), sid, t),
                )
                add(schedule_stream(sid), versions[s] + 1, _settled(sid, t, job_id, t + 60_000))
                versions[s] += 1
                if len(rows) >= 20_000:
                    flush()
        flush()
        began = time.perf_counter()
        report = rebuild(store, batch_size=10_000)
        elapsed = time.perf_counter() - began
        store.close()
    return [
        backend,
        f"{position:,}",
        f"{elapsed:.1f}",
        f"{position / elapsed:,.0f}",
        f"{report.applied['jobs']:,}",
    ]


def _definition(schedule_id: str) -> ScheduleDefined:
    definition = ScheduleDefinition(spec="@every:1000", kind="report.build", payload={"team": 7})
    return ScheduleDefined(schedule_id, definition, 1000)


def _database_bytes(store: SqlStore) -> int:
    if store.backend.name == "postgresql":
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("VACUUM"))
            return int(
                connection.execute(
                    text(
                        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                        "JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
                    )
                ).scalar_one()
            )
    with store.engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = connection.exec_driver_sql("PRAGMA page_count").scalar_one()
        page_size = connection.exec_driver_sql("PRAGMA page_size").scalar_one()
        return int(pages) * int(page_size)


def storage(backend: str, ticks: int) -> list[list[object]]:
    """One schedule ticking every second; jobs finish at once; compaction every 1,000 ticks."""
    checkpoints = {ticks // 10, ticks // 2, ticks}
    clock = FakeClock(0)
    rows: list[list[object]] = []
    with fresh_database(backend) as url:
        store = SqlStore(url, clock)
        store.log.append(schedule_stream("busy"), NO_STREAM, [_definition("busy")])
        policy = CompactionPolicy(finished_job_retention_ms=3_600_000)
        version, per_txn = 1, 100
        for first in range(1, ticks + 1, per_txn):
            clock.set(first * 1000)
            count = min(per_txn, ticks - first + 1)
            store.log.append_units(_tick_units("busy", first, count, version))
            version += count
            store.log.append_units(
                [
                    [
                        StreamAppend(
                            job_stream(f"busy-{t * 1000}"),
                            1,
                            (JobFinished(f"busy-{t * 1000}", JobState.COMPLETED),),
                        )
                    ]
                    for t in range(first, first + count)
                ]
            )
            done = first + count - 1
            if done % 1000 == 0:
                compact(store.database, store.log, policy)
            if done in checkpoints:
                with store.engine.connect() as connection:
                    event_rows = connection.execute(
                        text("SELECT COUNT(*) FROM headgate_events")
                    ).scalar_one()
                rows.append(
                    [backend, f"{done:,}", f"{_database_bytes(store) / 1e6:.2f}", f"{event_rows:,}"]
                )
        store.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], action="append")
    parser.add_argument("--singles", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--ticks", type=int, default=100_000)
    args = parser.parse_args()
    backends = args.backend or ["sqlite", "postgresql"]

    appends = [
        row for backend in backends for row in append_rates(backend, args.singles, args.batches)
    ]
    print_table(
        "Appends per second (ratio = ours / raw SQLAlchemy insert, same run)",
        ["backend", "mode", "ours/s", "raw/s", "ratio"],
        appends,
    )
    rebuilds = [rebuild_rate(backend, args.events) for backend in backends]
    print_table(
        "Rebuild of all projections from the log",
        ["backend", "events", "seconds", "events/s", "jobs rows"],
        rebuilds,
    )
    sizes = [row for backend in backends for row in storage(backend, args.ticks)]
    print_table(
        "Storage: one schedule ticked every second, compaction every 1,000 ticks",
        ["backend", "ticks", "database MB", "events kept"],
        sizes,
    )


if __name__ == "__main__":
    main()
