"""Headgate's schema: the event log, operational state and the projections.

Every table is named `headgate_...`, so Headgate can share a host's
database. (Stores made before Alembic arrive here through `legacy.py`.)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None

DUE = "NOT paused AND NOT deleted"
LIVE_UNIQUE_KEY = "state = 'pending' AND unique_key IS NOT NULL"
FINISHED = "state <> 'pending'"
PROJECTIONS = ("schedules", "jobs", "enqueue_history", "quarantine")


def upgrade() -> None:
    _log_and_operational_state()
    _projections()


def _log_and_operational_state() -> None:
    op.create_table(
        "headgate_events",
        sa.Column("position", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("stream_id", sa.String(255), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("schema_version", sa.SmallInteger, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("recorded_at_ms", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("stream_id", "version", name="uq_headgate_events_stream_version"),
    )
    log_head = op.create_table(
        "headgate_log_head",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    checkpoints = op.create_table(
        "headgate_projection_checkpoints",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("rebuilding", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "headgate_leases",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("holder", sa.String(128), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("term", sa.BigInteger, nullable=False),
        sa.Column("acquired_at_ms", sa.BigInteger, nullable=False),
        sa.Column("expires_at_ms", sa.BigInteger, nullable=False),
    )
    compaction_state = op.create_table(
        "headgate_compaction_state",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(log_head, [{"id": 1, "position": 0}])
    op.bulk_insert(
        checkpoints,
        [{"name": name, "position": 0, "rebuilding": False} for name in PROJECTIONS],
    )
    op.bulk_insert(compaction_state, [{"id": 1, "position": 0}])


def _projections() -> None:
    op.create_table(
        "headgate_schedules",
        sa.Column("schedule_id", sa.String(255), primary_key=True),
        sa.Column("spec", sa.String(512), nullable=False),
        sa.Column("kind", sa.String(128), nullable=False),
        sa.Column("queue", sa.String(128), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("on_missed", sa.String(16), nullable=False),
        sa.Column("backfill_limit", sa.Integer, nullable=False),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("next_run_ms", sa.BigInteger, nullable=False),
        sa.Column("due_at_ms", sa.BigInteger, nullable=False),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("last_enqueued_ms", sa.BigInteger),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("deleted", sa.Boolean, nullable=False),
        sa.Column("updated_at_ms", sa.BigInteger, nullable=False),
    )
    op.create_index(
        "ix_headgate_schedules_due_order",
        "headgate_schedules",
        ["due_at_ms", "schedule_id"],
        sqlite_where=sa.text(DUE),
        postgresql_where=sa.text(DUE),
    )
    op.create_table(
        "headgate_jobs",
        sa.Column("job_id", sa.String(255), primary_key=True),
        sa.Column("kind", sa.String(128), nullable=False),
        sa.Column("queue", sa.String(128), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("unique_key", sa.String(255)),
        sa.Column("created_at_ms", sa.BigInteger, nullable=False),
        sa.Column("updated_at_ms", sa.BigInteger, nullable=False),
        sa.Column("periodic_schedule_id", sa.String(255)),
        sa.Column("periodic_tick_ms", sa.BigInteger),
        sa.CheckConstraint(
            "(periodic_schedule_id IS NULL) = (periodic_tick_ms IS NULL)",
            name="ck_headgate_jobs_periodic_origin_pair",
        ),
    )
    op.create_index(
        "ux_headgate_jobs_live_unique_key",
        "headgate_jobs",
        ["unique_key"],
        unique=True,
        sqlite_where=sa.text(LIVE_UNIQUE_KEY),
        postgresql_where=sa.text(LIVE_UNIQUE_KEY),
    )
    op.create_index("ix_headgate_jobs_queue_state", "headgate_jobs", ["queue", "state"])
    op.create_index(
        "ix_headgate_jobs_finished",
        "headgate_jobs",
        ["updated_at_ms"],
        sqlite_where=sa.text(FINISHED),
        postgresql_where=sa.text(FINISHED),
    )
    op.create_table(
        "headgate_enqueue_history",
        sa.Column("event_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("schedule_id", sa.String(255), nullable=False),
        sa.Column("tick_ms", sa.BigInteger, nullable=False),
        sa.Column("job_id", sa.String(255), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("recorded_at_ms", sa.BigInteger, nullable=False),
    )
    op.create_index(
        "ix_headgate_enqueue_history_schedule",
        "headgate_enqueue_history",
        ["schedule_id", "event_id"],
    )
    op.create_table(
        "headgate_quarantine",
        sa.Column("fingerprint", sa.String(128), primary_key=True),
        sa.Column("note", sa.String(255), nullable=False),
        sa.Column("quarantined_at_ms", sa.BigInteger, nullable=False),
    )
