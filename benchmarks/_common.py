"""Shared benchmark plumbing: fresh databases on both backends, and tables."""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    Select,
    String,
    Table,
    Text,
    create_engine,
    event,
    func,
    select,
    text,
)
from sqlalchemy.engine import make_url

DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/headgate_bench"


def postgres_server() -> str:
    return os.environ.get("HEADGATE_BENCH_POSTGRES_URL", DEFAULT_POSTGRES)


def _ensure_database(url: str) -> None:
    parsed = make_url(url)
    admin = create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        exists = connection.execute(
            text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": parsed.database}
        ).first()
        if exists is None:
            connection.execute(text(f'CREATE DATABASE "{parsed.database}"'))
    admin.dispose()


@contextlib.contextmanager
def fresh_database(backend: str) -> Iterator[str]:
    """A URL to an empty database on `backend` ("sqlite" or "postgresql"), removed afterwards."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="headgate-bench-") as directory:
            yield f"sqlite:///{Path(directory) / 'bench.db'}"
        return
    server = postgres_server()
    _ensure_database(server)
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    engine = create_engine(server)
    with engine.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        url = make_url(server).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with engine.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


def raw_engine(url: str) -> Engine:
    """An engine for a raw baseline, as durable as Headgate's store: on SQLite every
    connection in WAL mode with synchronous=FULL (Headgate's settings), so a
    commit costs both the same."""
    engine = create_engine(url)
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _durable(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.close()

    return engine


def _process_write_bytes() -> int:
    with open("/proc/self/io") as counters:
        fields = dict(line.split(": ") for line in counters.read().splitlines())
    return int(fields["write_bytes"])


@contextlib.contextmanager
def bytes_written(url: str) -> Iterator[Callable[[], int]]:
    """What the store writes while the block runs: on PostgreSQL the WAL it makes
    (the server's LSN moved; nothing else should write meanwhile), on SQLite the
    bytes this process wrote to storage (the WAL and the checkpoints into the
    database file; Linux's /proc/self/io)."""
    if make_url(url).get_backend_name() == "sqlite":
        start = _process_write_bytes()
        yield lambda: _process_write_bytes() - start
        return
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            start_lsn = connection.execute(text("SELECT pg_current_wal_lsn()")).scalar_one()

        def wal_since() -> int:
            with engine.connect() as connection:
                return int(
                    connection.execute(
                        text("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), :start)"),
                        {"start": start_lsn},
                    ).scalar_one()
                )

        yield wal_since
    finally:
        engine.dispose()


def locked_log_head(engine: Engine) -> Select[Any]:
    """The log head's position, read as a writer of the store reads it: locked on
    PostgreSQL (SQLite's write transaction holds the whole file)."""
    from headgate._store.sql.schema import log_head

    query = select(log_head.c.position).where(log_head.c.id == 1)
    return query.with_for_update() if engine.dialect.name == "postgresql" else query


def last_position(connection: Connection, head_query: Select[Any]) -> int:
    """The last log position written, for a floor loop's events to follow: the head
    row (`locked_log_head`) on SQLite; on PostgreSQL, whose positions come from a
    sequence and whose head row no longer moves, the higher of it and the log's."""
    from headgate._store.sql.schema import events

    return max(
        int(connection.execute(head_query).scalar_one()),
        int(connection.execute(select(func.coalesce(func.max(events.c.position), 0))).scalar_one()),
    )


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(value) for value in row] for row in rows]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(header)]
    print(f"\n{title}")
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(value.rjust(w) for value, w in zip(row, widths, strict=True)))


def raw_jobs_table(metadata: MetaData) -> Table:
    """The raw baselines' plain jobs table (`workers`, `write_cost`): what a job
    queue needs with no event log, no projections and no audit."""
    return Table(
        "raw_jobs",
        metadata,
        Column("job_id", String(255), primary_key=True),
        Column("queue", String(128), nullable=False),
        Column("kind", String(128), nullable=False),
        Column("payload", Text, nullable=False),
        Column("state", String(16), nullable=False),
        Column("run_at_ms", BigInteger, nullable=False),
        Column("attempts", Integer, nullable=False),
        Column("worker_id", String(128)),
        Column("deadline_ms", BigInteger),
        Column("result", Text),
    )
