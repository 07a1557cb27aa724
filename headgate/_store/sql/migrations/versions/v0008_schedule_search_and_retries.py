"""The schedules list gains an index for its search and count; job histories
gain a row for each operator's retry.

`ix_headgate_schedules_listed` holds live schedules by id, code point by code
point (on PostgreSQL under the "C" collation, whatever the database's): the
list walks it in that order, a search by id prefix reads one range of it, and
the count counts that range.

The job_attempts projection now makes a `retried` row from each JobRetried, so
the attempts that follow a retry (numbered from 1 again) are told apart from
those before it. The rows a fold of the log would have made are added for the
retries the projection had already folded (up to its checkpoint: a rebuild
under way folds the rest itself), so the table stays what a rebuild makes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from headgate._domain.streams import JOB_PREFIX
from headgate._store.sql.backends import code_point_order

revision = "0008"
down_revision = "0007"

LISTED = "NOT deleted"


def upgrade() -> None:
    op.create_index(
        "ix_headgate_schedules_listed",
        "headgate_schedules",
        [code_point_order(sa.column("schedule_id"))],
        sqlite_where=sa.text(LISTED),
        postgresql_where=sa.text(LISTED),
    )
    op.execute(
        sa.text(
            "INSERT INTO headgate_job_attempts (event_id, job_id, attempt, outcome, "
            "worker_id, started_at_ms, ended_at_ms, error_type, error_message) "
            "SELECT position, substr(stream_id, :after_prefix), 0, 'retried', "
            "NULL, NULL, recorded_at_ms, NULL, NULL FROM headgate_events "
            "WHERE type = 'JobRetried' AND position <= ("
            "  SELECT position FROM headgate_projection_checkpoints"
            "  WHERE name = 'job_attempts')"
        ).bindparams(after_prefix=len(JOB_PREFIX) + 1)
    )
