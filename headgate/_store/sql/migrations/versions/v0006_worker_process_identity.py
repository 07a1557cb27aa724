"""Worker heartbeat rows gain the identity of their process on its machine.

`process_boot_id`, `process_namespaces` and `process_start_ticks` tell a
worker's process apart from every other process of its machine (see
`headgate._runtime.local_processes`), so a worker on the same machine can
rescue a dead one at once instead of waiting for its heartbeat to expire.
Rows written before them have none, and stay on the heartbeat TTL rule.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"

WORKERS = "headgate_workers"


def upgrade() -> None:
    op.add_column(WORKERS, sa.Column("process_boot_id", sa.String(64)))
    op.add_column(WORKERS, sa.Column("process_namespaces", sa.String(128)))
    op.add_column(WORKERS, sa.Column("process_start_ticks", sa.BigInteger))
