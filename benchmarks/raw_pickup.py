"""The raw baseline of pickup latency: a SKIP LOCKED loop on a plain table.

Its enqueue is one transaction (INSERT ... RETURNING, and on PostgreSQL a
NOTIFY in it); its worker claims up to four rows in one statement (`UPDATE
... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING`), calls the
handler inline with each id, marks them done, and when it found nothing waits
for the store's notification: LISTEN on PostgreSQL, the file's data version
read every 5 ms on SQLite (as Headgate's watcher reads it), a one-second poll
behind either. Run in a thread of the measuring process or, through `main`,
as a process of its own that prints each handler start (`started <id> <time>`).
"""

from __future__ import annotations

import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, text

from benchmarks._common import raw_engine

CHANNEL = "raw_pickup"
WATCH_EVERY_S = 0.005
POLL_S = 1.0
_CLAIM_PG = text(
    "UPDATE raw_pickup SET state = 'running' WHERE id IN (SELECT id FROM raw_pickup"
    " WHERE state = 'pending' ORDER BY id LIMIT 4 FOR UPDATE SKIP LOCKED) RETURNING id"
)
_CLAIM_SQLITE = text(
    "UPDATE raw_pickup SET state = 'running' WHERE id IN (SELECT id FROM raw_pickup"
    " WHERE state = 'pending' ORDER BY id LIMIT 4) RETURNING id"
)
_DONE = text("UPDATE raw_pickup SET state = 'done' WHERE id = :id")


def create_table(engine: Engine) -> None:
    key = (
        "id BIGSERIAL PRIMARY KEY"
        if engine.dialect.name == "postgresql"
        else "id INTEGER PRIMARY KEY AUTOINCREMENT"
    )
    with engine.begin() as connection:
        connection.execute(
            text(f"CREATE TABLE raw_pickup ({key}, state TEXT NOT NULL DEFAULT 'pending')")
        )
        connection.execute(
            text("CREATE INDEX raw_pickup_pending ON raw_pickup (id) WHERE state = 'pending'")
        )


def enqueue(engine: Engine) -> str:
    """One job, committed, its worker told (NOTIFY on PostgreSQL)."""
    with engine.begin() as connection:
        job_id = connection.execute(
            text("INSERT INTO raw_pickup (state) VALUES ('pending') RETURNING id")
        ).scalar_one()
        if engine.dialect.name == "postgresql":
            connection.execute(text(f"NOTIFY {CHANNEL}"))
    return str(job_id)


class RawWorker:
    """The loop, on a thread of its own until `stop`."""

    def __init__(self, url: str, handler: Callable[[str], None]) -> None:
        self._engine = raw_engine(url)
        self._handler = handler
        self._stopped = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="raw-pickup", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
        self._engine.dispose()

    def _run(self) -> None:
        if self._engine.dialect.name == "postgresql":
            self._run_postgresql()
        else:
            self._run_sqlite()

    def _claim_and_run(self, claim: Any) -> int:
        with self._engine.begin() as connection:
            if self._engine.dialect.name == "sqlite":
                connection.exec_driver_sql("BEGIN IMMEDIATE")
            ids = [str(row[0]) for row in connection.execute(claim)]
        for job_id in ids:
            self._handler(job_id)
        if ids:
            with self._engine.begin() as connection:
                connection.execute(_DONE, [{"id": int(job_id)} for job_id in ids])
        return len(ids)

    def _run_postgresql(self) -> None:
        listening = self._engine.raw_connection()
        driver: Any = listening.driver_connection
        driver.autocommit = True
        driver.execute(f"LISTEN {CHANNEL}")
        self._ready.set()
        try:
            while not self._stopped.is_set():
                if self._claim_and_run(_CLAIM_PG):
                    continue
                for _ in driver.notifies(timeout=POLL_S, stop_after=1):
                    pass
        finally:
            listening.close()

    def _run_sqlite(self) -> None:
        path = str(self._engine.url.database)
        watcher = sqlite3.connect(path, isolation_level=None)
        seen = None
        self._ready.set()
        waited = 0.0
        try:
            while not self._stopped.is_set():
                version = watcher.execute("PRAGMA data_version").fetchone()[0]
                if version != seen or waited >= POLL_S:
                    seen, waited = version, 0.0
                    if self._claim_and_run(_CLAIM_SQLITE):
                        continue
                time.sleep(WATCH_EVERY_S)
                waited += WATCH_EVERY_S
        finally:
            watcher.close()


def main() -> None:
    """A worker process: prints `ready`, then `started <id> <epoch s>` per job."""

    def stamp(job_id: str) -> None:
        print(f"started {job_id} {time.time()!r}", flush=True)

    worker = RawWorker(sys.argv[1], stamp)
    worker.start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
