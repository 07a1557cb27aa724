"""Claims across a rebuild: what a fold of the log cannot make.

A worker's claim is the job row's own state (running, its worker, its
deadline), not an event, so folding the log makes a claimed job pending at
the version it was claimed at. A rebuild of the jobs projection keeps the
claims it finds (`keep`) and puts each back on its rebuilt row (`restore`)
before writes resume, so no job runs twice because of a rebuild; verify
compares a fold with the live rows the same way (`jobs.as_claimed`).
"""

from __future__ import annotations

from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.engine import Connection

from headgate._domain.events import JobState
from headgate._projections.jobs import CLAIM_COLUMNS
from headgate._store.sql.predicates import RUNNING_WHERE
from headgate._store.sql.schema import LIVE, rebuild_claims

_jobs = LIVE.jobs


def keep(connection: Connection) -> None:
    """Keep the claims of the jobs running now (the jobs table is then emptied)."""
    connection.execute(delete(rebuild_claims))
    running = select(_jobs.c.job_id, _jobs.c.version, *(_jobs.c[c] for c in CLAIM_COLUMNS))
    connection.execute(
        insert(rebuild_claims).from_select(
            ["job_id", "version", *CLAIM_COLUMNS], running.where(text(RUNNING_WHERE))
        )
    )


def restore(connection: Connection) -> int:
    """Put the kept claims back on the rebuilt rows still at their version (and
    pending, as a fold leaves them); returns how many went back."""
    kept = rebuild_claims
    restored = connection.execute(
        update(_jobs)
        .where(
            _jobs.c.job_id == kept.c.job_id,
            _jobs.c.version == kept.c.version,
            _jobs.c.state == JobState.PENDING.value,
        )
        .values(state=JobState.RUNNING.value, **{c: kept.c[c] for c in CLAIM_COLUMNS})
    ).rowcount
    connection.execute(delete(kept))
    return int(restored)
