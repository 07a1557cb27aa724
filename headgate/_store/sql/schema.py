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

from typing import Final

from sqlalchemy import (
    BigInteger,
    Boolean,
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
)

from headgate._store.sql.projection_tables import projection_tables

TABLE_PREFIX: Final = "headgate_"
LOG = MetaData()

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


LIVE = projection_tables(LOG, TABLE_PREFIX)
