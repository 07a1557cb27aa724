"""The conditions of the partial indexes, as SQL text.

Each is written once, here: the index's declaration (`projection_tables`) and
the queries that must use the index state it in the same words, since a
database uses a partial index only for a query whose condition matches its
own (SQLite textually).
"""

from __future__ import annotations

from typing import Final

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
