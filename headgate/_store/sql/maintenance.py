"""Rebuild, verify and replay projections from the event log.

* rebuild: empties live projection tables and refolds the log into them in
  batches. Each batch commits with its checkpoint, so an interrupted rebuild
  resumes where it stopped. While a projection lags, live writes are refused
  (see SqlEventLog.write); when the rebuild reaches the head, the live path
  takes over again in the same serialised order.
* verify: refolds the whole log into scratch tables and compares them with
  the live tables, row by row.
* replay: refolds the log, optionally up to a position, into fresh tables in
  another database or into scratch tables, to inspect past state. It reads
  without a lock; rows folded from events that a compaction removed meanwhile
  are dropped at the end.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import Engine, MetaData, Table, delete, exists, func, literal, select, update
from sqlalchemy.engine import Connection

from headgate._domain.streams import JOB_PREFIX, job_stream
from headgate._errors import StoreUnopenable, ValidationError
from headgate._projections import ALL_PROJECTIONS, JOBS, AnyProjection
from headgate._projections.jobs import as_claimed
from headgate._store.sql import claims
from headgate._store.sql.backends import backend_named, dialect_of
from headgate._store.sql.engine import (
    create_store_engine,
    parse_store_url,
    shown_url,
    translated_errors,
    write_transaction,
)
from headgate._store.sql.event_rows import decode_row, events_between
from headgate._store.sql.migrations import migrate
from headgate._store.sql.projection_tables import ProjectionTables, projection_tables
from headgate._store.sql.projector import CHUNK, fold_into_table
from headgate._store.sql.schema import LIVE, events, log_head, projection_checkpoints
from headgate._store.sql.store import SqlStore

DEFAULT_BATCH: Final = 5000
MAX_BATCH: Final = 100_000
"""A batch is read into memory and written in one transaction."""
VERIFY_PREFIX: Final = "headgate_verify_"
REPLAY_PREFIX: Final = "headgate_replay_"
ProgressCallback = Callable[[str, int, int], None]
"""(projection or phase name, position reached, target position)."""


def select_projections(names: Sequence[str] | None) -> tuple[AnyProjection, ...]:
    if not names:
        return ALL_PROJECTIONS
    known = {projection.name: projection for projection in ALL_PROJECTIONS}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValidationError(
            "--projection",
            f"unknown {', '.join(map(repr, unknown))}; choose from {', '.join(known)}",
        )
    return tuple(known[name] for name in dict.fromkeys(names))


@dataclass
class RebuildReport:
    resumed: list[str] = field(default_factory=list)
    applied: Counter[str] = field(default_factory=Counter)
    head: int = 0


def rebuild(
    store: SqlStore,
    names: Sequence[str] | None = None,
    batch_size: int = DEFAULT_BATCH,
    on_progress: ProgressCallback | None = None,
) -> RebuildReport:
    chosen = select_projections(names)
    require_batch_size(batch_size)  # before the live tables are emptied
    report = RebuildReport()
    with store.log.write(while_rebuilding=True) as transaction:
        states = _checkpoints(transaction.connection)
        for projection in chosen:
            if states[projection.name][1]:
                report.resumed.append(projection.name)
                continue
            if projection.table == JOBS.table:
                claims.keep(transaction.connection)
            transaction.connection.execute(delete(LIVE.by_name(projection.table)))
            _set_checkpoint(transaction.connection, projection.name, 0, rebuilding=True)
    while True:
        with store.log.write(while_rebuilding=True) as transaction:
            connection, head = transaction.connection, transaction.head
            states = _checkpoints(connection)
            behind = [p for p in chosen if states[p.name][1] and states[p.name][0] < head]
            if not behind:
                # Live again, all at once: writes resume with the kept claims back
                # on their jobs, never in between.
                if any(projection.table == JOBS.table for projection in chosen):
                    claims.restore(connection)
                for projection in chosen:
                    _set_checkpoint(connection, projection.name, head, rebuilding=False)
                report.head = head
                break
            start = min(states[p.name][0] for p in behind)
            batch = _read_batch(connection, start, head, batch_size)
            reached = batch[-1].position if len(batch) == batch_size else head
            for projection in behind:
                checkpoint = states[projection.name][0]
                own = [event for event in batch if event.position > checkpoint]
                table = LIVE.by_name(projection.table)
                report.applied[projection.name] += fold_into_table(
                    connection, projection, table, own
                )
                position = max(reached, checkpoint)
                _set_checkpoint(connection, projection.name, position, rebuilding=True)
        report.head = head
        if on_progress is not None:
            on_progress("rebuild", reached, head)
    return report


def require_batch_size(batch_size: int) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise ValidationError("--batch-size", f"must be a whole number, got {batch_size!r}")
    if not 1 <= batch_size <= MAX_BATCH:
        raise ValidationError("--batch-size", f"must be 1-{MAX_BATCH}, got {batch_size}")


def _checkpoints(connection: Connection) -> dict[str, tuple[int, bool]]:
    rows = connection.execute(
        select(
            projection_checkpoints.c.name,
            projection_checkpoints.c.position,
            projection_checkpoints.c.rebuilding,
        )
    )
    return {name: (int(position), bool(rebuilding)) for name, position, rebuilding in rows}


def _set_checkpoint(connection: Connection, name: str, position: int, *, rebuilding: bool) -> None:
    """A projection's rebuild checkpoint, and the log head's flag with it: live writes
    are refused while any projection rebuilds, and fold a live one themselves."""
    connection.execute(
        update(projection_checkpoints)
        .where(projection_checkpoints.c.name == name)
        .values(position=position, rebuilding=rebuilding)
    )
    any_rebuilding = exists().where(projection_checkpoints.c.rebuilding)
    connection.execute(update(log_head).where(log_head.c.id == 1).values(rebuilding=any_rebuilding))


def _read_batch(connection: Connection, after: int, until: int, limit: int | None) -> list[Any]:
    """Like EventStore.read_all, but inside the caller's transaction."""
    return [decode_row(row) for row in connection.execute(events_between(after, until, limit))]


@contextlib.contextmanager
def scratch_tables(
    engine: Engine, prefix: str, *, keep: bool = False
) -> Iterator[ProjectionTables]:
    """Fresh projection-shaped tables named `<prefix>...`, dropped afterwards unless kept."""
    metadata = MetaData()
    tables = projection_tables(metadata, prefix)
    with write_transaction(engine, "creating scratch tables") as connection:
        metadata.drop_all(connection)
        metadata.create_all(connection)
    try:
        yield tables
    finally:
        if not keep:
            with write_transaction(engine, "dropping scratch tables") as connection:
                metadata.drop_all(connection)


@dataclass(frozen=True)
class FoldTarget:
    """Where a refold writes: a database and a set of projection tables in it."""

    engine: Engine
    tables: ProjectionTables


def _fold_range(
    store: SqlStore,
    target: FoldTarget,
    *,
    after: int,
    until: int,
    batch_size: int,
    counts: Counter[str],
    on_progress: ProgressCallback | None,
) -> int:
    """Fold events in (after, until] into the target; returns the position reached."""
    position = after
    while position < until:
        batch = store.log.read_all(position, batch_size, until_position=until)
        if not batch:
            break
        with write_transaction(target.engine, "writing projections") as connection:
            for projection in ALL_PROJECTIONS:
                table = target.tables.by_name(projection.table)
                fold_into_table(connection, projection, table, batch)
        counts.update(recorded.type for recorded in batch)
        position = batch[-1].position
        if on_progress is not None:
            on_progress("events", position, until)
    return position


@dataclass(frozen=True)
class RowDifference:
    projection: str
    key: Any
    live: dict[str, Any] | None
    rebuilt: dict[str, Any] | None


@dataclass
class VerifyReport:
    head: int = 0
    differences: list[RowDifference] = field(default_factory=list)
    difference_count: int = 0
    lagging: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.difference_count == 0 and not self.lagging


MAX_REPORTED_DIFFERENCES: Final = 50


def verify(
    store: SqlStore,
    names: Sequence[str] | None = None,
    batch_size: int = DEFAULT_BATCH,
    on_progress: ProgressCallback | None = None,
) -> VerifyReport:
    chosen = select_projections(names)
    require_batch_size(batch_size)
    report = VerifyReport()
    with scratch_tables(store.engine, VERIFY_PREFIX) as scratch:
        counts: Counter[str] = Counter()
        start_head = store.log.head()
        reached = _fold_range(
            store,
            FoldTarget(store.engine, scratch),
            after=0,
            until=start_head,
            batch_size=batch_size,
            counts=counts,
            on_progress=on_progress,
        )
        with (
            store.log.write(while_rebuilding=True) as transaction,
            dialect_of(transaction.connection).scanning_tables(transaction.connection),
        ):
            connection = transaction.connection
            _drop_what_compaction_removed(connection, scratch, reached)
            for recorded in _read_batch(connection, reached, transaction.head, None):
                for projection in ALL_PROJECTIONS:
                    fold_into_table(
                        connection, projection, scratch.by_name(projection.table), [recorded]
                    )
            report.head = transaction.head
            states = _checkpoints(connection)
            for projection in chosen:
                if states[projection.name][1]:
                    report.lagging.append(projection.name)
                    continue
                _compare(connection, projection, LIVE, scratch, report)
    return report


def _drop_what_compaction_removed(
    connection: Connection, scratch: ProjectionTables, folded_up_to: int
) -> None:
    """Compaction may have run since the unlocked part of the fold (up to
    `folded_up_to`). It removed old attempts and finished jobs from the log,
    and their live rows with them: the scratch rows folded from those events go
    too. A job counts as gone even if its id has come back since (an Enqueue
    now key reused after both expired): the rest of the fold makes it anew."""
    history = scratch.enqueue_history
    for by_position in (history, scratch.job_attempts):  # rows keyed by their event
        connection.execute(
            delete(by_position).where(~exists().where(events.c.position == by_position.c.event_id))
        )
    for by_job in (scratch.jobs, scratch.schedule_runs):  # rows that go with their job
        connection.execute(
            delete(by_job).where(
                ~exists().where(
                    events.c.stream_id == literal(JOB_PREFIX) + by_job.c.job_id,
                    events.c.version == 1,
                    events.c.position <= folded_up_to,
                )
            )
        )


def _compare(
    connection: Connection,
    projection: AnyProjection,
    live: ProjectionTables,
    rebuilt: ProjectionTables,
    report: VerifyReport,
) -> None:
    live_table, rebuilt_table = live.by_name(projection.table), rebuilt.by_name(projection.table)
    key = projection.key_column
    live_rows = _rows_by_key(connection, live_table, key)
    rebuilt_rows = _rows_by_key(connection, rebuilt_table, key)
    if projection.table == JOBS.table:  # claims are the rows' state, kept by a rebuild
        rebuilt_rows = {
            job_id: as_claimed(row, live_rows.get(job_id)) for job_id, row in rebuilt_rows.items()
        }
    for row_key in sorted(live_rows.keys() | rebuilt_rows.keys(), key=str):
        before, after = live_rows.get(row_key), rebuilt_rows.get(row_key)
        if before != after:
            report.difference_count += 1
            if len(report.differences) < MAX_REPORTED_DIFFERENCES:
                report.differences.append(RowDifference(projection.name, row_key, before, after))


def _rows_by_key(connection: Connection, table: Table, key: str) -> dict[Any, dict[str, Any]]:
    return {row[key]: dict(row) for row in connection.execute(select(table)).mappings()}


@dataclass
class ReplayReport:
    target: str
    """Where the projections went: scratch tables, or the --to URL with its
    password masked."""
    until: int
    applied: Counter[str] = field(default_factory=Counter)
    rows: dict[str, int] = field(default_factory=dict)


def replay(
    store: SqlStore,
    to_url: str | None = None,
    until: int | None = None,
    batch_size: int = DEFAULT_BATCH,
    on_progress: ProgressCallback | None = None,
) -> ReplayReport:
    """Fold the log (up to `until`) into fresh projections elsewhere; they are kept."""
    require_batch_size(batch_size)
    if until is not None and until < 0:
        raise ValidationError("--until", f"must be a position >= 0, got {until}")
    head = store.log.head()
    stop = head if until is None else min(until, head)
    if to_url is None:
        with scratch_tables(store.engine, REPLAY_PREFIX, keep=True) as tables:
            report = ReplayReport(f"scratch tables {REPLAY_PREFIX}* in the source database", stop)
            _replay_into(store, FoldTarget(store.engine, tables), report, batch_size, on_progress)
        return report
    target = parse_store_url(to_url)
    try:
        backend_named(target.get_backend_name()).connector.check_openable(target)
    except StoreUnopenable as error:
        raise StoreUnopenable(f"--to: {error}") from None
    engine = create_store_engine(to_url)
    try:
        migrate(engine)
        _require_empty(engine)
        report = ReplayReport(shown_url(target), stop)
        _replay_into(store, FoldTarget(engine, LIVE), report, batch_size, on_progress)
    finally:
        engine.dispose()
    return report


def _replay_into(
    store: SqlStore,
    target: FoldTarget,
    report: ReplayReport,
    batch_size: int,
    on_progress: ProgressCallback | None,
) -> None:
    reached = _fold_range(
        store,
        target,
        after=0,
        until=report.until,
        batch_size=batch_size,
        counts=report.applied,
        on_progress=on_progress,
    )
    _drop_rows_whose_events_are_gone(store, target, reached)
    report.rows = _row_counts(target)


def _drop_rows_whose_events_are_gone(
    store: SqlStore, target: FoldTarget, folded_up_to: int
) -> None:
    """A compaction running while replay folded (without a lock, so writers go
    on) removed old attempts and finished jobs from the log: the target's rows
    folded from them go too, so the target is a fold of the log as it now is.

    Like `_drop_what_compaction_removed`, but the target may be another
    database: its rows are checked against the log a chunk at a time.
    """
    history, jobs = target.tables.enqueue_history, target.tables.jobs
    for column, still_in_log in (
        (history.c.event_id, _attempts_in_log),
        (target.tables.job_attempts.c.event_id, _attempts_in_log),
        (jobs.c.job_id, _jobs_in_log),
        (target.tables.schedule_runs.c.job_id, _jobs_in_log),
    ):
        after: Any = None
        while True:
            with translated_errors("reading the replay target"), target.engine.connect() as read:
                page = select(column).order_by(column).limit(CHUNK)
                if after is not None:
                    page = page.where(column > after)
                keys = list(read.execute(page).scalars())
            if not keys:
                break
            after = keys[-1]
            with translated_errors("reading the log"), store.engine.connect() as source:
                kept = still_in_log(source, keys, folded_up_to)
            gone = [key for key in keys if key not in kept]
            if gone:
                with write_transaction(target.engine, "dropping rows of compacted events") as write:
                    write.execute(delete(column.table).where(column.in_(gone)))


def _attempts_in_log(source: Connection, positions: list[int], _folded_up_to: int) -> set[Any]:
    dialect = dialect_of(source)
    query = select(events.c.position).where(dialect.is_one_of(events.c.position, positions))
    with dialect.probing_indexes(source):
        return set(source.execute(query).scalars())


def _jobs_in_log(source: Connection, job_ids: list[str], folded_up_to: int) -> set[Any]:
    """Jobs whose stream still starts within the fold (a reused Enqueue-now id
    that came back later was not folded: it goes, as in verify)."""
    streams = [job_stream(job_id) for job_id in job_ids]
    dialect = dialect_of(source)
    query = select(events.c.stream_id).where(
        dialect.is_one_of(events.c.stream_id, streams),
        events.c.version == 1,
        events.c.position <= folded_up_to,
    )
    with dialect.probing_indexes(source):
        return {stream.removeprefix(JOB_PREFIX) for stream in source.execute(query).scalars()}


def _require_empty(engine: Engine) -> None:
    with translated_errors("inspecting the replay target"), engine.connect() as connection:
        for table in LIVE.all():
            if connection.execute(select(func.count()).select_from(table)).scalar():
                raise ValueError(
                    f"--to: the target already has rows in {table.name}; "
                    "replay needs a fresh database"
                )


def _row_counts(target: FoldTarget) -> dict[str, int]:
    counts: dict[str, int] = {}
    with translated_errors("counting rows"), target.engine.connect() as connection:
        for table in target.tables.all():
            count = connection.execute(select(func.count()).select_from(table)).scalar()
            counts[table.name] = int(count or 0)
    return counts
