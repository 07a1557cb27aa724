"""The database schema, in SQLAlchemy Core, shared by SQLite and PostgreSQL.

Every table's name starts with `headgate_`, so Headgate can live in a host's
own database (PostgreSQL's `public` schema, or a host's SQLite file) beside
the host's tables. `LOG` holds the record of truth (the event log) and
operational state (log head, leases, checkpoints). Projection tables are
built by a function so the same shape can be created under another prefix as
scratch tables for `--verify` and `replay`.

These objects describe the latest schema. They are never used to create a
live store: the migrations (`migrations/versions/`) do that, each revision
stating its own DDL, and `tests/store/test_schema.py` fails when a database
migrated from the first revision differs from what these objects create.
So a change here needs a new revision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    Sequence,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)

from headgate._store.sql.backends import code_point_order

TABLE_PREFIX: Final = "headgate_"
LOG = MetaData()

DUE_INDEX_WHERE: Final = "NOT paused AND NOT deleted AND NOT finished"
DECLARED_WHERE: Final = "declared_by IS NOT NULL"
UNDECLARED_WHERE: Final = "undeclared_at_ms IS NOT NULL AND NOT deleted"
"""The due read's partial index covers live, unpaused, unfinished schedules only."""
LIVE_SPECS_WHERE: Final = "NOT deleted AND NOT finished"
"""The live schedules' specs, which the store-wide ceilings weigh: a query says
it in these words."""
LISTED_WHERE: Final = "NOT deleted"
WAITING_RUNS_WHERE: Final = "state = 'enqueued' AND tick_ms IS NOT NULL"
"""A schedule's tick runs not settled: what `late` looks among (a few each)."""
"""The schedules list's partial index: live schedules by id, code point by code
point. A query says it in these words (SQLite matches a partial index's
predicate by its terms)."""
FINISHED_JOBS_WHERE: Final = "state IN ('completed', 'failed', 'cancelled', 'expired')"
"""The partial index compaction finds expired jobs by: queries must say it in these words."""
LIVE_UNIQUE_KEY_WHERE: Final = "state IN ('pending', 'running') AND unique_key IS NOT NULL"
"""The partial unique index on unfinished jobs' unique keys: lookups say it in these words."""
CLAIMABLE_WHERE: Final = "state = 'pending'"
"""The claim index: pending jobs by (queue, priority descending, fair_turn,
run_at_ms, job_id)."""
LIVE_PARTITIONED_WHERE: Final = "state IN ('pending', 'running') AND partition_key IS NOT NULL"
"""A partition's latest turn in its lane, read when the gate admits one of its jobs."""
PENDING_WITH_DEADLINE_WHERE: Final = "state = 'pending' AND start_by_ms IS NOT NULL"
"""Pending jobs by start deadline: those past it are expired in bulk before a claim."""
RUNNING_WHERE: Final = "state = 'running'"
"""Running jobs by worker, for rescue and for a worker's own checks."""
NOT_COMPLETED_WHERE: Final = "state <> 'completed'"
"""The jobs list by state, newest first: every state but completed, which most jobs
are and which walking the creation index finds at once. A query says it in
these words (SQLite uses a partial index only for a condition that names it)."""
NOT_PENDING_WHERE: Final = "state <> 'pending'"
"""A kind's jobs by state, but its pending ones (which the state index holds, and
which the claim's reads must not find on this index, made for the jobs list)."""


def live_ticks_where(table: str | None = None) -> str:
    """Tick jobs pending or running, by (schedule, tick): what overlap policies ask
    of a schedule, at admission and at a serial job's claim (`table`: the name
    or alias the query gives the jobs table, if it must say)."""
    at = "" if table is None else f"{table}."
    return f"{at}state IN ('pending', 'running') AND {at}periodic_schedule_id IS NOT NULL"


LIVE_TICKS_WHERE: Final = live_ticks_where()
PERIODIC_WHERE: Final = "periodic_schedule_id IS NOT NULL"
"""A schedule's tick jobs, newest first (the jobs list filtered by schedule)."""
RUN_NOW_WHERE: Final = "run_now_schedule_id IS NOT NULL"
"""A schedule's manual runs, newest first: only jobs Enqueue now made are indexed."""
HAS_UNIQUE_KEY_WHERE: Final = "unique_key IS NOT NULL"
"""Jobs searched by unique key, newest first, finished ones too."""

events = Table(
    f"{TABLE_PREFIX}events",
    LOG,
    Column("position", BigInteger, primary_key=True, autoincrement=False),
    Column("stream_id", String(255), nullable=False),
    Column("version", Integer, nullable=False),
    Column("type", String(64), nullable=False),
    Column("schema_version", SmallInteger, nullable=False),
    Column("body", Text, nullable=False),
    Column("recorded_at_ms", BigInteger, nullable=False),
    UniqueConstraint("stream_id", "version", name=f"uq_{TABLE_PREFIX}events_stream_version"),
)

log_head = Table(
    f"{TABLE_PREFIX}log_head",
    LOG,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("position", BigInteger, nullable=False),
    Column("rebuilding", Boolean, nullable=False, server_default=false()),
)
"""One row. On SQLite, the last assigned log position: appenders lock it, which
serialises appends so positions are gap-free and commit in order (on
PostgreSQL positions come from `POSITIONS`, and this one is not moved).
`rebuilding`: some projection is being rebuilt (its checkpoint says how far),
so live writes are refused; the first statement of every write reads it."""

POSITIONS: Final = Sequence(f"{TABLE_PREFIX}event_positions", start=1)
"""PostgreSQL's source of log positions (`postgresql.SequenceOrder`); SQLite
hands them out from the log head."""

projection_checkpoints = Table(
    f"{TABLE_PREFIX}projection_checkpoints",
    LOG,
    Column("name", String(64), primary_key=True),
    Column("position", BigInteger, nullable=False),
    Column("rebuilding", Boolean, nullable=False, server_default=false()),
)
"""Per projection, while it is being rebuilt: how far the rebuild has folded. A
live projection follows the log head in every append's own transaction, so
its row is not moved by live writes (its position is where it last went live)."""

leases = Table(
    f"{TABLE_PREFIX}leases",
    LOG,
    Column("name", String(64), primary_key=True),
    Column("holder", String(128), nullable=False),
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("term", BigInteger, nullable=False),
    Column("acquired_at_ms", BigInteger, nullable=False),
    Column("expires_at_ms", BigInteger, nullable=False),
)

compaction_state = Table(
    f"{TABLE_PREFIX}compaction_state",
    LOG,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("position", BigInteger, nullable=False),
)
"""One row: the log position up to which streams have been compacted."""

workers = Table(
    f"{TABLE_PREFIX}workers",
    LOG,
    Column("worker_id", String(128), primary_key=True),
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("queues", Text, nullable=False),
    Column("started_at_ms", BigInteger, nullable=False),
    Column("heartbeat_at_ms", BigInteger, nullable=False),
    Column("expires_at_ms", BigInteger, nullable=False),
    Column("running", Integer, nullable=False),
    Column("overdue", Integer, nullable=False),
    Column("process_boot_id", String(64)),
    Column("process_namespaces", String(128)),
    Column("process_start_ticks", BigInteger),
    Column("kinds", Text),
)
"""One row per worker process start: operational state, like a lease. Its
heartbeat moves expires_at_ms on; once that passes, the rescuer takes the
worker's running jobs back (and removes the row). `queues` is JSON
{queue: capacity}; `overdue` counts handlers still running past their timeout.
The `process_` columns identify the process for certain on its machine (all
three, or none: an earlier build's row, or a system without /proc), so a
worker there can rescue it as soon as it is dead. The table holds a row per
running worker process and is read whole, so it has no index on them."""


rate_starts = Table(
    f"{TABLE_PREFIX}rate_starts",
    LOG,
    Column("rate_class", String(128), nullable=False),
    Column("started_at_ms", BigInteger, nullable=False),
    Column("job_id", String(255), nullable=False),
)
"""When each job of a rate class was claimed, within the class's window:
operational state, like a claim (the claim that starts a job writes its row,
and drops the rows its window has passed). A claim counts these to keep a
rate limit (`limits.RateLimit`)."""
Index(f"ix_{TABLE_PREFIX}rate_starts", rate_starts.c.rate_class, rate_starts.c.started_at_ms)


queue_turns = Table(
    f"{TABLE_PREFIX}queue_turns",
    LOG,
    Column("queue", String(128), primary_key=True),
    Column("priority", Integer, primary_key=True, autoincrement=False),
    Column("turn", BigInteger, nullable=False),
)
"""Each lane's (queue, priority) current fair-share turn: the highest turn a
claim has taken in it. Operational state, like a claim (the claim that takes
a job of a higher turn raises it); the gate reads it to give each job its turn
(`fair_share`). A lane whose turns are all 0 has no row."""


activity = Table(
    f"{TABLE_PREFIX}activity",
    LOG,
    Column("minute_ms", BigInteger, primary_key=True, autoincrement=False),
    Column("series", String(32), primary_key=True),
    Column("key", String(512), primary_key=True),
    Column("value", Float, nullable=False),
)
"""The per-minute activity roll-up the console's overview draws (`activity`):
a day of minutes, written once a minute by the scheduler lease's holder."""


revoked_sessions = Table(
    f"{TABLE_PREFIX}revoked_sessions",
    LOG,
    Column("session_id", String(64), primary_key=True),
    Column("expires_at_ms", BigInteger, nullable=False),
    Index(f"ix_{TABLE_PREFIX}revoked_sessions_expires", "expires_at_ms"),
)
"""The console's ended login sessions, each until it would have expired anyway
(`SessionRevocations`): operational state, dropped once expired."""


handler_declarations = Table(
    f"{TABLE_PREFIX}handler_declarations",
    LOG,
    Column("kind", String(128), primary_key=True),
    Column("declared_by", String(128), primary_key=True),
    Column("queue", String(128), nullable=False),
    Column("priority", Integer, nullable=False),
    Column("start_within_ms", BigInteger),
    Column("partition_key", String(128)),
    Column("rate_class", String(128)),
    Column("host", String(255), nullable=False),
    Column("declared_at_ms", BigInteger, nullable=False),
)
"""The handlers each declarations group's code registers, with the defaults
they give a job at enqueue (`HandlerDeclarations`): operational state, one row
per kind and group, read by kind (its primary key) when a process without the
handler enqueues."""


rebuild_claims = Table(
    f"{TABLE_PREFIX}rebuild_claims",
    LOG,
    Column("job_id", String(255), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("worker_id", String(128), nullable=False),
    Column("deadline_ms", BigInteger),
    Column("updated_at_ms", BigInteger, nullable=False),
)
"""The claims of the jobs that were running when a rebuild of the jobs projection
began. A claim is the job row's state, not an event, so a fold of the log makes
those jobs pending; the rebuild puts each claim back on its job's rebuilt row
(at the same version) before writes resume, and empties this table. Kept in a
table so that a rebuild that is interrupted and resumed still has them."""


@dataclass(frozen=True)
class ProjectionTables:
    schedules: Table
    jobs: Table
    enqueue_history: Table
    quarantine: Table
    job_attempts: Table
    crash_blame: Table
    paused_queues: Table
    concurrency_limits: Table
    rate_limits: Table
    schedule_runs: Table

    def by_name(self, table_name: str) -> Table:
        table: Table = getattr(self, table_name)
        return table

    def all(self) -> tuple[Table, ...]:
        return (
            self.schedules,
            self.jobs,
            self.enqueue_history,
            self.quarantine,
            self.job_attempts,
            self.crash_blame,
            self.paused_queues,
            self.concurrency_limits,
            self.rate_limits,
            self.schedule_runs,
        )


def projection_tables(metadata: MetaData, prefix: str = "") -> ProjectionTables:
    """The projection tables, named `<prefix><name>`, in `metadata`."""
    schedules = Table(
        f"{prefix}schedules",
        metadata,
        Column("schedule_id", String(255), primary_key=True),
        Column("spec", String(512), nullable=False),
        Column("kind", String(128), nullable=False),
        Column("queue", String(128), nullable=False),
        Column("payload", Text, nullable=False),
        Column("on_missed", String(16), nullable=False),
        Column("backfill_limit", Integer, nullable=False),
        Column("paused", Boolean, nullable=False),
        Column("next_run_ms", BigInteger, nullable=False),
        Column("due_at_ms", BigInteger, nullable=False),
        Column("failures", Integer, nullable=False),
        Column("last_enqueued_ms", BigInteger),
        Column("version", Integer, nullable=False),
        Column("deleted", Boolean, nullable=False),
        Column("updated_at_ms", BigInteger, nullable=False),
        Column("max_attempts", Integer),
        Column("timeout_ms", BigInteger),
        Column("start_at_ms", BigInteger),
        Column("end_at_ms", BigInteger),
        Column("jitter_ms", Integer, nullable=False, server_default=text("0")),
        Column("finished", Boolean, nullable=False, server_default=false()),
        Column("declared", Text),
        Column("declared_by", String(128)),
        Column("undeclared_at_ms", BigInteger),
        Column("summary", String(500), nullable=False, server_default=text("''")),
        Column("priority", Integer),
        Column("overlap", String(16), nullable=False, server_default=text("'allow'")),
        Column("start_within_ms", BigInteger),
        Column("partition_key", String(128)),
        Column("rate_class", String(128)),
    )
    Index(
        f"ix_{prefix}schedules_due_order",
        schedules.c.due_at_ms,
        schedules.c.schedule_id,
        sqlite_where=text(DUE_INDEX_WHERE),
        postgresql_where=text(DUE_INDEX_WHERE),
    )
    Index(
        f"ix_{prefix}schedules_declared",
        schedules.c.declared_by,
        schedules.c.schedule_id,
        sqlite_where=text(DECLARED_WHERE),
        postgresql_where=text(DECLARED_WHERE),
    )
    Index(
        f"ix_{prefix}schedules_undeclared",
        schedules.c.schedule_id,
        sqlite_where=text(UNDECLARED_WHERE),
        postgresql_where=text(UNDECLARED_WHERE),
    )
    Index(
        f"ix_{prefix}schedules_listed",
        code_point_order(schedules.c.schedule_id),
        sqlite_where=text(LISTED_WHERE),
        postgresql_where=text(LISTED_WHERE),
    )
    """The list, its search by id prefix and its count: a range of this index."""
    Index(
        f"ix_{prefix}schedules_live_specs",
        schedules.c.spec,
        sqlite_where=text(LIVE_SPECS_WHERE),
        postgresql_where=text(LIVE_SPECS_WHERE),
    )
    jobs = Table(
        f"{prefix}jobs",
        metadata,
        Column("job_id", String(255), primary_key=True),
        Column("kind", String(128), nullable=False),
        Column("queue", String(128), nullable=False),
        Column("payload", Text, nullable=False),
        Column("state", String(16), nullable=False),
        Column("unique_key", String(255)),
        Column("created_at_ms", BigInteger, nullable=False),
        Column("updated_at_ms", BigInteger, nullable=False),
        Column("periodic_schedule_id", String(255)),
        Column("periodic_tick_ms", BigInteger),
        Column("attempts", Integer, nullable=False, server_default=text("0")),
        Column("crash_count", Integer, nullable=False, server_default=text("0")),
        Column("run_at_ms", BigInteger, nullable=False, server_default=text("0")),
        Column("max_attempts", Integer),
        Column("timeout_ms", BigInteger),
        Column("worker_id", String(128)),
        Column("deadline_ms", BigInteger),
        Column("version", Integer, nullable=False, server_default=text("1")),
        Column("result", Text),
        Column("error_type", String(255)),
        Column("error_message", Text),
        Column("run_now_schedule_id", String(255)),
        Column("priority", Integer, nullable=False, server_default=text("0")),
        Column("serial", Boolean, nullable=False, server_default=false()),
        Column("start_within_ms", BigInteger),
        Column("start_by_ms", BigInteger),
        Column("snoozes", Integer, nullable=False, server_default=text("0")),
        Column("partition_key", String(128)),
        Column("rate_class", String(128)),
        Column("fair_turn", BigInteger, nullable=False, server_default=text("0")),
        Column("trace_context", String(1024)),
        Column("tags", Text),
        CheckConstraint(
            "(periodic_schedule_id IS NULL) = (periodic_tick_ms IS NULL)",
            name=f"ck_{prefix}jobs_periodic_origin_pair",
        ),
    )
    Index(
        f"ux_{prefix}jobs_live_unique_key",
        jobs.c.unique_key,
        unique=True,
        sqlite_where=text(LIVE_UNIQUE_KEY_WHERE),
        postgresql_where=text(LIVE_UNIQUE_KEY_WHERE),
    )
    Index(
        f"ux_{prefix}jobs_periodic_origin",
        jobs.c.periodic_schedule_id,
        jobs.c.periodic_tick_ms,
        unique=True,
        sqlite_where=text(PERIODIC_WHERE),
        postgresql_where=text(PERIODIC_WHERE),
    )
    """One job per (schedule, tick), tick jobs alone indexed: an index a row is in
    takes a new entry at each change of its state (claimed, ended)."""
    Index(
        f"ix_{prefix}jobs_live_ticks",
        jobs.c.periodic_schedule_id,
        jobs.c.periodic_tick_ms,
        sqlite_where=text(LIVE_TICKS_WHERE),
        postgresql_where=text(LIVE_TICKS_WHERE),
    )
    Index(f"ix_{prefix}jobs_queue_state", jobs.c.queue, jobs.c.state)
    Index(
        f"ix_{prefix}jobs_claimable",
        jobs.c.queue,
        jobs.c.priority.desc(),
        jobs.c.fair_turn,
        jobs.c.run_at_ms,
        jobs.c.job_id,
        sqlite_where=text(CLAIMABLE_WHERE),
        postgresql_where=text(CLAIMABLE_WHERE),
    )
    Index(
        f"ix_{prefix}jobs_partition_turns",
        jobs.c.queue,
        jobs.c.partition_key,
        jobs.c.priority,
        jobs.c.fair_turn,
        sqlite_where=text(LIVE_PARTITIONED_WHERE),
        postgresql_where=text(LIVE_PARTITIONED_WHERE),
    )
    Index(f"ix_{prefix}jobs_created", jobs.c.created_at_ms, jobs.c.job_id)
    Index(
        f"ix_{prefix}jobs_state_created",
        jobs.c.state,
        jobs.c.created_at_ms,
        jobs.c.job_id,
        sqlite_where=text(NOT_COMPLETED_WHERE),
        postgresql_where=text(NOT_COMPLETED_WHERE),
    )
    Index(
        f"ix_{prefix}jobs_schedule_created",
        jobs.c.periodic_schedule_id,
        jobs.c.created_at_ms,
        jobs.c.job_id,
        sqlite_where=text(PERIODIC_WHERE),
        postgresql_where=text(PERIODIC_WHERE),
    )
    Index(
        f"ix_{prefix}jobs_run_now",
        jobs.c.run_now_schedule_id,
        jobs.c.created_at_ms,
        jobs.c.job_id,
        sqlite_where=text(RUN_NOW_WHERE),
        postgresql_where=text(RUN_NOW_WHERE),
    )
    Index(
        f"ix_{prefix}jobs_start_by",
        jobs.c.start_by_ms,
        jobs.c.job_id,
        sqlite_where=text(PENDING_WITH_DEADLINE_WHERE),
        postgresql_where=text(PENDING_WITH_DEADLINE_WHERE),
    )
    Index(
        f"ix_{prefix}jobs_running",
        jobs.c.worker_id,
        sqlite_where=text(RUNNING_WHERE),
        postgresql_where=text(RUNNING_WHERE),
    )
    Index(
        f"ix_{prefix}jobs_finished",
        jobs.c.updated_at_ms,
        sqlite_where=text(FINISHED_JOBS_WHERE),
        postgresql_where=text(FINISHED_JOBS_WHERE),
    )
    Index(
        f"ix_{prefix}jobs_unique_key",
        jobs.c.unique_key,
        jobs.c.created_at_ms,
        jobs.c.job_id,
        sqlite_where=text(HAS_UNIQUE_KEY_WHERE),
        postgresql_where=text(HAS_UNIQUE_KEY_WHERE),
    )
    Index(
        f"ix_{prefix}jobs_kind_state",
        jobs.c.kind,
        jobs.c.state,
        jobs.c.created_at_ms,
        jobs.c.job_id,
        sqlite_where=text(NOT_PENDING_WHERE),
        postgresql_where=text(NOT_PENDING_WHERE),
    )
    enqueue_history = Table(
        f"{prefix}enqueue_history",
        metadata,
        Column("event_id", BigInteger, primary_key=True, autoincrement=False),
        Column("schedule_id", String(255), nullable=False),
        Column("tick_ms", BigInteger, nullable=False),
        Column("job_id", String(255), nullable=False),
        Column("outcome", String(16), nullable=False),
        Column("reason", String(64), nullable=False),
        Column("attempt", Integer, nullable=False),
        Column("recorded_at_ms", BigInteger, nullable=False),
    )
    Index(
        f"ix_{prefix}enqueue_history_schedule",
        enqueue_history.c.schedule_id,
        enqueue_history.c.event_id,
    )
    Index(f"ix_{prefix}enqueue_history_recorded", enqueue_history.c.recorded_at_ms)
    quarantine = Table(
        f"{prefix}quarantine",
        metadata,
        Column("fingerprint", String(128), primary_key=True),
        Column("note", String(255), nullable=False),
        Column("quarantined_at_ms", BigInteger, nullable=False),
    )
    job_attempts = Table(
        f"{prefix}job_attempts",
        metadata,
        Column("event_id", BigInteger, primary_key=True, autoincrement=False),
        Column("job_id", String(255), nullable=False),
        Column("attempt", Integer, nullable=False),
        Column("outcome", String(16), nullable=False),
        Column("worker_id", String(128)),
        Column("started_at_ms", BigInteger),
        Column("ended_at_ms", BigInteger, nullable=False),
        Column("error_type", String(255)),
        Column("error_message", Text),
        Column("traceback", Text),
    )
    Index(f"ix_{prefix}job_attempts_job", job_attempts.c.job_id, job_attempts.c.event_id)
    Index(f"ix_{prefix}job_attempts_ended", job_attempts.c.ended_at_ms)
    crash_blame = Table(
        f"{prefix}crash_blame",
        metadata,
        Column("fingerprint", String(128), primary_key=True),
        Column("blame_milli", Integer, nullable=False),
        Column("last_job_id", String(255), nullable=False),
        Column("updated_at_ms", BigInteger, nullable=False),
    )
    paused_queues = Table(
        f"{prefix}paused_queues",
        metadata,
        Column("queue", String(128), primary_key=True),
        Column("note", String(255), nullable=False),
        Column("paused_at_ms", BigInteger, nullable=False),
    )
    concurrency_limits = Table(
        f"{prefix}concurrency_limits",
        metadata,
        Column("scope", String(512), primary_key=True),
        Column("queue", String(128)),
        Column("kind", String(128)),
        Column("partition_key", String(128)),
        Column("max_running", Integer, nullable=False),
        Column("set_at_ms", BigInteger, nullable=False),
    )
    rate_limits = Table(
        f"{prefix}rate_limits",
        metadata,
        Column("rate_class", String(128), primary_key=True),
        Column("max_starts", Integer, nullable=False),
        Column("per_ms", BigInteger, nullable=False),
        Column("set_at_ms", BigInteger, nullable=False),
    )
    schedule_runs = Table(
        f"{prefix}schedule_runs",
        metadata,
        Column("job_id", String(255), primary_key=True),
        Column("schedule_id", String(255), nullable=False),
        Column("position", BigInteger, nullable=False),
        Column("tick_ms", BigInteger),
        Column("manual", Boolean, nullable=False),
        Column("enqueued_at_ms", BigInteger, nullable=False),
        Column("state", String(16), nullable=False),
        Column("attempts", Integer, nullable=False),
        Column("started_at_ms", BigInteger),
        Column("finished_at_ms", BigInteger),
        Column("error_type", String(255)),
        Column("updated_at_ms", BigInteger, nullable=False),
    )
    Index(
        f"ix_{prefix}schedule_runs_schedule",
        schedule_runs.c.schedule_id,
        schedule_runs.c.position,
    )
    Index(
        f"ix_{prefix}schedule_runs_waiting",
        schedule_runs.c.schedule_id,
        schedule_runs.c.tick_ms,
        sqlite_where=text(WAITING_RUNS_WHERE),
        postgresql_where=text(WAITING_RUNS_WHERE),
    )
    return ProjectionTables(
        schedules,
        jobs,
        enqueue_history,
        quarantine,
        job_attempts,
        crash_blame,
        paused_queues,
        concurrency_limits,
        rate_limits,
        schedule_runs,
    )


LIVE = projection_tables(LOG, TABLE_PREFIX)
