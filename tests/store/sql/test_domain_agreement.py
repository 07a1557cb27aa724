"""Where the SQL adapter states in SQL what the domain or the port states in
Python, the two say the same."""

from __future__ import annotations

from headgate._domain.retention import REMOVABLE_JOB_STATES
from headgate._store.port import SCHEMA_REVISION
from headgate._store.sql.migrations import LATEST_VERSION, revisions_on_disk
from headgate._store.sql.predicates import FINISHED_JOBS_WHERE


def test_compaction_finds_the_jobs_the_retention_rules_remove() -> None:
    """The partial index's predicate names exactly the removable states."""
    listed = FINISHED_JOBS_WHERE.removeprefix("state IN (").removesuffix(")")
    assert {state.strip().strip("'") for state in listed.split(",")} == REMOVABLE_JOB_STATES


def test_the_ports_schema_revision_is_the_newest_migration() -> None:
    """A memory store answers SCHEMA_REVISION: a new migration must move it too."""
    assert revisions_on_disk()[-1] == SCHEMA_REVISION == LATEST_VERSION
