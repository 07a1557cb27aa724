"""Worker heartbeats on SQL: one row per worker process start (operational state).

A row's process identity is three nullable columns, all set or all NULL (rows
from before revision 0006 have none): read back as `WorkerRow.process`.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.engine import Connection

from headgate._store.port import ProcessIdentity, WorkerBeat, WorkerRow, Workers
from headgate._store.sql.database import Database
from headgate._store.sql.schema import workers

_PROCESS_COLUMNS = ("process_boot_id", "process_namespaces", "process_start_ticks")


def _row(mapping: Any) -> WorkerRow:
    values = {k: v for k, v in mapping.items() if k not in _PROCESS_COLUMNS}
    boot_id, namespaces, start_ticks = (mapping[name] for name in _PROCESS_COLUMNS)
    process = None
    if boot_id is not None and namespaces is not None and start_ticks is not None:
        process = ProcessIdentity(boot_id, namespaces, int(start_ticks))
    kinds = values.get("kinds")
    return WorkerRow(
        **{
            **values,
            "queues": json.loads(values["queues"]),
            "process": process,
            "kinds": None if kinds is None else tuple(json.loads(kinds)),
        }
    )


def _process_values(process: ProcessIdentity | None) -> dict[str, object]:
    if process is None:
        return dict.fromkeys(_PROCESS_COLUMNS)
    return {
        "process_boot_id": process.boot_id,
        "process_namespaces": process.namespaces,
        "process_start_ticks": process.start_ticks,
    }


def expired(connection: Connection, now_ms: int) -> list[WorkerRow]:
    query = select(workers).where(workers.c.expires_at_ms <= now_ms).order_by(workers.c.worker_id)
    return [_row(row) for row in connection.execute(query).mappings()]


def forget(connection: Connection, rows: Collection[WorkerRow]) -> None:
    """Delete each row only if it has not beaten since it was read."""
    if rows:
        connection.execute(
            delete(workers).where(
                workers.c.worker_id == bindparam("forgotten_id"),
                workers.c.heartbeat_at_ms == bindparam("read_heartbeat_ms"),
            ),
            [
                {"forgotten_id": row.worker_id, "read_heartbeat_ms": row.heartbeat_at_ms}
                for row in rows
            ],
        )


class SqlWorkers(Workers):
    def __init__(self, database: Database) -> None:
        self._database = database
        self._clock = database.clock

    def beat(self, beat: WorkerBeat, ttl_ms: int) -> WorkerRow:
        with self._database.serialised_write("renewing a worker's heartbeat") as connection:
            self._database.synchronise_clock(connection)
            now = self._clock.now_ms()
            values = {
                "host": beat.host,
                "pid": beat.pid,
                "queues": json.dumps(dict(beat.queues), sort_keys=True),
                "started_at_ms": beat.started_at_ms,
                "heartbeat_at_ms": now,
                "expires_at_ms": now + ttl_ms,
                "running": beat.running,
                "overdue": beat.overdue,
                "kinds": None if beat.kinds is None else json.dumps(sorted(beat.kinds)),
                **_process_values(beat.process),
            }
            renewed = connection.execute(
                update(workers).where(workers.c.worker_id == beat.worker_id).values(**values)
            ).rowcount
            if not renewed:
                statement = self._database.dialect.insert_if_absent(workers, "worker_id")
                connection.execute(statement.values(worker_id=beat.worker_id, **values))
        return WorkerRow.beaten(beat, now, ttl_ms)

    def stop(self, worker_id: str) -> None:
        with self._database.serialised_write("removing a worker's heartbeat") as connection:
            connection.execute(delete(workers).where(workers.c.worker_id == worker_id))

    def live(self, now_ms: int) -> list[WorkerRow]:
        query = (
            select(workers)
            .where(workers.c.expires_at_ms > now_ms)
            .order_by(workers.c.started_at_ms, workers.c.worker_id)
        )
        with self._database.reading("reading workers") as connection:
            return [_row(row) for row in connection.execute(query).mappings()]

    def in_namespaces(self, boot_id: str, namespaces: str) -> list[WorkerRow]:
        query = (
            select(workers)
            .where(
                workers.c.process_boot_id == boot_id,
                workers.c.process_namespaces == namespaces,
                workers.c.process_start_ticks.is_not(None),
            )
            .order_by(workers.c.started_at_ms, workers.c.worker_id)
        )
        with self._database.reading("reading workers") as connection:
            return [_row(row) for row in connection.execute(query).mappings()]
