"""A single enqueue on an idle store, on SQLite and PostgreSQL, printed as a table.

Ours: `hg.enqueue(kind, payload)` called one after another (no worker running),
each call timed from its start to its return (the commit included). Compared,
in the same run and database server, with
  * raw: an INSERT of the same job row into a plain table and its COMMIT
    (SQLAlchemy Core), as durable as ours (SQLite in WAL with synchronous=FULL);
  * this design's floor: the rows an enqueue must write, written the raw way
    in one transaction (the log head locked and moved, the JobEnqueued event,
    the job's row), with no validation, gate, objects or logging.
Statements: what the server was sent per enqueue (PostgreSQL: its round
trips, counted from the client's protocol trace; SQLite: the statements
the library ran, counted by its trace callback), BEGIN and COMMIT included.

Target (issue 21): ours <= 1 ms p50 on both backends, in <= 4 statements.

Run: python -m benchmarks.enqueue [--backend sqlite|postgresql] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import BigInteger, Column, Engine, MetaData, String, Table, Text, insert
from sqlalchemy import update as sql_update

from benchmarks._common import fresh_database, locked_log_head, print_table, raw_engine
from benchmarks.scheduler import quiet_json_logs
from headgate import Headgate
from headgate._domain.streams import job_stream

KIND = "email.send"
PAYLOAD = {"to": "ada@example.com", "template": "welcome"}


def _percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[max(int(len(ordered) * share) - 1, 0)]


def _timed(call: Callable[[], object], count: int) -> list[float]:
    for _ in range(20):  # warm: connections, prepared statements, caches
        call()
    samples = []
    for _ in range(count):
        began = time.perf_counter()
        call()
        samples.append((time.perf_counter() - began) * 1000)
    return samples


@contextlib.contextmanager
def counting_statements(engine: Engine) -> Iterator[Callable[[], int]]:
    """What the engine's connections send while the block runs: round trips on
    PostgreSQL (each ends in ReadyForQuery), statements on SQLite. The engine
    must hold one connection (a store's writer does): it is traced, then
    handed back to the pool for the block to use."""
    pooled = engine.raw_connection()
    driver: Any = pooled.driver_connection
    pooled.close()
    if engine.dialect.name == "postgresql":
        import psycopg

        with tempfile.TemporaryFile() as trace:
            driver.pgconn.trace(trace.fileno())
            driver.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)

            def round_trips() -> int:
                trace.seek(0)
                return trace.read().decode(errors="replace").count("\tReadyForQuery\t")

            try:
                yield round_trips
            finally:
                driver.pgconn.untrace()
        return
    seen = [0]

    def count(_statement: str) -> None:
        seen[0] += 1

    driver.set_trace_callback(count)
    try:
        yield lambda: seen[0]
    finally:
        driver.set_trace_callback(None)


def ours(backend: str, count: int) -> tuple[list[float], float]:
    with fresh_database(backend) as url:
        hg = Headgate(url)
        samples = _timed(lambda: hg.enqueue(KIND, PAYLOAD), count)
        writer = hg._core.store.database.write_engine  # every write of the process goes through it
        with counting_statements(writer) as sent:
            for _ in range(10):
                hg.enqueue(KIND, PAYLOAD)
            statements = sent() / 10
        hg.close()
    return samples, statements


def raw(backend: str, count: int) -> list[float]:
    with fresh_database(backend) as url:
        engine = raw_engine(url)
        metadata = MetaData()
        jobs = Table(
            "raw_jobs",
            metadata,
            Column("job_id", String(64), primary_key=True),
            Column("kind", String(128), nullable=False),
            Column("queue", String(128), nullable=False),
            Column("payload", Text, nullable=False),
            Column("state", String(16), nullable=False),
            Column("run_at_ms", BigInteger, nullable=False),
        )
        metadata.create_all(engine)
        payload = json.dumps(PAYLOAD)

        def enqueue() -> None:
            with engine.begin() as connection:
                connection.execute(
                    insert(jobs).values(
                        job_id=uuid.uuid4().hex,
                        kind=KIND,
                        queue="default",
                        payload=payload,
                        state="pending",
                        run_at_ms=int(time.time() * 1000),
                    )
                )

        samples = _timed(enqueue, count)
        engine.dispose()
    return samples


def floor(backend: str, count: int) -> list[float]:
    from headgate._store.sql.schema import LIVE, events, log_head

    jobs = LIVE.jobs
    with fresh_database(backend) as url:
        Headgate(url).close()  # the schema, its indexes and the log head
        engine = raw_engine(url)
        head_query = locked_log_head(engine)
        payload = json.dumps(PAYLOAD, sort_keys=True, separators=(",", ":"))

        def enqueue() -> None:
            job_id = uuid.uuid4().hex
            now = int(time.time() * 1000)
            with engine.begin() as connection:
                head = connection.execute(head_query).scalar_one() + 1
                body = {"job_id": job_id, "kind": KIND, "payload": PAYLOAD, "options": {}}
                connection.execute(
                    insert(events).values(
                        position=head,
                        stream_id=job_stream(job_id),
                        version=1,
                        type="JobEnqueued",
                        schema_version=4,
                        body=json.dumps(body),
                        recorded_at_ms=now,
                    )
                )
                connection.execute(
                    insert(jobs).values(
                        job_id=job_id,
                        kind=KIND,
                        queue="default",
                        payload=payload,
                        state="pending",
                        created_at_ms=now,
                        updated_at_ms=now,
                        run_at_ms=now,
                        version=1,
                    )
                )
                connection.execute(sql_update(log_head).values(position=head))

        samples = _timed(enqueue, count)
        engine.dispose()
    return samples


def row(backend: str, count: int) -> list[object]:
    raw_samples = raw(backend, count)
    floor_samples = floor(backend, count)
    our_samples, statements = ours(backend, count)
    ours_p50, raw_p50 = statistics.median(our_samples), statistics.median(raw_samples)
    return [
        backend,
        f"{ours_p50:.2f}",
        f"{_percentile(our_samples, 0.99):.2f}",
        f"{raw_p50:.2f}",
        f"{_percentile(raw_samples, 0.99):.2f}",
        f"{statistics.median(floor_samples):.2f}",
        f"{ours_p50 / raw_p50:.1f}",
        f"{ours_p50 / statistics.median(floor_samples):.1f}",
        f"{statements:g}",
        "<= 1 ms, <= 4",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], action="append")
    parser.add_argument("--quick", action="store_true", help="fewer calls, for a smoke run")
    args = parser.parse_args()
    quiet_json_logs()
    count = 100 if args.quick else 1_000
    rows = [row(backend, count) for backend in args.backend or ["sqlite", "postgresql"]]
    print_table(
        f"One enqueue on an idle store, {count:,} calls (ms)",
        [
            "backend",
            "ours p50",
            "ours p99",
            "raw p50",
            "raw p99",
            "floor p50",
            "ours/raw",
            "ours/floor",
            "statements",
            "target",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
