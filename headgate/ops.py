"""Store maintenance, for operators and scripts: what `headgate projections` and
`headgate events` run, as functions.

Each takes a store URL that must already exist (a typo never creates an
empty database), opens the store, does its work and closes it. Those that only
read (`read_events`, `verify`) create and migrate nothing: they raise
StoreNotFound for a URL that holds no store and SchemaBehind for one that a
migrating command must upgrade first. Reports are plain dataclasses;
`on_progress(phase, reached, target)` is called as long work advances.

    from headgate import ops
    report = ops.verify("sqlite:///headgate.db")
    assert report.ok
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from headgate._clock import SystemClock
from headgate._domain.streams import job_stream, schedule_stream
from headgate._errors import NotFound, StoreNotFound, ValidationError
from headgate._store.mapper import encode
from headgate._store.port import CompactionReport, EventLog
from headgate._store.sql import maintenance
from headgate._store.sql.maintenance import (
    DEFAULT_BATCH,
    MAX_BATCH,
    RebuildReport,
    ReplayReport,
    RowDifference,
    VerifyReport,
)
from headgate._store.sql.store import SqlStore, open_existing_store

__all__ = [
    "DEFAULT_BATCH",
    "MAX_BATCH",
    "CompactionReport",
    "LoggedEvent",
    "ProgressCallback",
    "RebuildReport",
    "ReplayReport",
    "RowDifference",
    "VerifyReport",
    "compact",
    "read_events",
    "rebuild",
    "replay",
    "verify",
]

ProgressCallback = Callable[[str, int, int], None]
"""(phase, position reached, target position)."""


@dataclass(frozen=True)
class LoggedEvent:
    """One event as the log stores it."""

    position: int
    stream_id: str
    version: int
    recorded_at_ms: int
    type: str
    schema_version: int
    body: str
    """Canonical JSON text."""


@contextmanager
def _existing_store(url: str) -> Iterator[SqlStore]:
    """The store, migrated if it is behind (for what writes to it); StoreNotFound
    for a URL holding none, database or not (a typo never gets a store made)."""
    store = open_existing_store(url, SystemClock(), read_only=False)
    try:
        yield store
    finally:
        store.close()


@contextmanager
def _store_to_read(url: str, nothing_to: str) -> Iterator[SqlStore]:
    """The store as it is, for what only reads it: nothing is created or migrated."""
    try:
        store = SqlStore(url, SystemClock(), migrate_schema=False)
    except StoreNotFound as error:
        raise StoreNotFound(f"{error} (nothing to {nothing_to})") from None
    try:
        yield store
    finally:
        store.close()


def rebuild(
    url: str,
    projections: Sequence[str] | None = None,
    *,
    batch_size: int = DEFAULT_BATCH,
    on_progress: ProgressCallback | None = None,
) -> RebuildReport:
    """Empty the live projection tables and refold the log into them (resumable:
    run it again after an interruption). Writes are refused meanwhile."""
    with _existing_store(url) as store:
        return maintenance.rebuild(store, projections, batch_size, on_progress)


def verify(
    url: str,
    projections: Sequence[str] | None = None,
    *,
    batch_size: int = DEFAULT_BATCH,
    on_progress: ProgressCallback | None = None,
) -> VerifyReport:
    """Refold the log into scratch tables and compare them with the live ones
    (nothing live is written; the store is never created or migrated)."""
    with _store_to_read(url, "verify") as store:
        return maintenance.verify(store, projections, batch_size, on_progress)


def replay(
    url: str,
    to_url: str | None = None,
    *,
    until: int | None = None,
    batch_size: int = DEFAULT_BATCH,
    on_progress: ProgressCallback | None = None,
) -> ReplayReport:
    """Fold the log (up to position `until`) into a fresh database's projection
    tables, or into scratch tables beside the live ones; copies no events."""
    with _existing_store(url) as store:
        return maintenance.replay(store, to_url, until, batch_size, on_progress)


def read_events(
    url: str, *, after: int = 0, limit: int = 50, stream: str | None = None
) -> list[LoggedEvent]:
    """Events after log position `after`, in order. `stream`: only that stream's,
    named by its id (`schedule-nightly`) or by its schedule's or job's id
    (`nightly`); NotFound if none has events in the log."""
    with _store_to_read(url, "show") as store:
        if stream is not None:
            stream_id = _stream_named(store.log, stream)
            recorded = [e for e in store.log.read_stream(stream_id) if e.position > after]
            recorded = recorded[:limit]
        else:
            recorded = store.log.read_all(after, limit)
    logged = []
    for entry in recorded:
        type_name, schema_version, body = encode(entry.event)
        logged.append(
            LoggedEvent(
                entry.position,
                entry.stream_id,
                entry.version,
                entry.recorded_at_ms,
                type_name,
                schema_version,
                body,
            )
        )
    return logged


def _stream_named(log: EventLog, name: str) -> str:
    """The stream `name` is the id of, else that of the schedule or the job with id
    `name` (streams are named by `_domain.streams`)."""
    if log.stream_version(name):
        return name
    found = [sid for sid in (schedule_stream(name), job_stream(name)) if log.stream_version(sid)]
    if not found:
        raise NotFound(f"--stream: no stream, schedule or job {name!r} has events in the log")
    if len(found) > 1:
        streams = " or ".join(found)
        raise ValidationError("--stream", f"{name!r} is a schedule's and a job's id; use {streams}")
    return found[0]


def compact(url: str) -> CompactionReport:
    """One compaction run (the scheduler's lease holder runs one every minute)."""
    with _existing_store(url) as store:
        return store.compact()
