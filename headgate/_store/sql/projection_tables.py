"""The projection tables (read models), made by a function so the same shape can
be created under another prefix as scratch tables for `--verify` and `replay`
(`schema.LIVE` is the live ones). See `schema` for how the declared schema is
held to the migrations."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    false,
    text,
)

from headgate._store.sql.backends import code_point_order
from headgate._store.sql.predicates import (
    CLAIMABLE_WHERE,
    DECLARED_WHERE,
    DUE_INDEX_WHERE,
    FINISHED_JOBS_WHERE,
    HAS_UNIQUE_KEY_WHERE,
    LISTED_WHERE,
    LIVE_PARTITIONED_WHERE,
    LIVE_SPECS_WHERE,
    LIVE_TICKS_WHERE,
    LIVE_UNIQUE_KEY_WHERE,
    NOT_COMPLETED_WHERE,
    NOT_PENDING_WHERE,
    PENDING_WITH_DEADLINE_WHERE,
    PERIODIC_WHERE,
    RUN_NOW_WHERE,
    RUNNING_WHERE,
    UNDECLARED_WHERE,
    WAITING_RUNS_WHERE,
)


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
