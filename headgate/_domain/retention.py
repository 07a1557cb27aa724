"""What compaction keeps: the log's retention rules, as data and pure functions.

Every store compacts by these rules (the SQL adapter in SQL, the memory store
in Python), so what survives a compaction is decided once. They follow from
what each stream family needs to rebuild its projections exactly:

* a trimmed stream (schedules, quarantine) keeps the newest event of each
  type, since the newest of a type supersedes the older ones: the latest
  ScheduleDefined is a full snapshot of the schedule, and every later type
  (an advance, a deletion, a release, a blame with its total) folds into the
  row whatever came before it. A schedule's stream also keeps its newest
  `attempts_per_schedule` EnqueueAttempted, for the enqueue history, and its
  newest `definitions_per_schedule` ScheduleDefined, for its definition
  history (what it was as of an instant, and who changed it: `as_of`);
* a job's stream is never trimmed: it goes whole, with its rows, once the job
  has finished (completed, failed or cancelled) more than
  `finished_job_retention_ms` ago, unless it is one of its schedule's newest
  `runs_per_schedule` runs (the run history and the health it shows fold
  those jobs' events);
* a manual-run key's stream (its idempotency record) goes once it is older
  than `manual_key_retention_ms`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from headgate._domain.events import (
    JOB_EVENTS,
    DomainEvent,
    EnqueueAttempted,
    JobState,
    ManualRunRequested,
    ScheduleDefined,
)
from headgate._domain.streams import SCHEDULE_PREFIX

__all__ = [
    "ATTEMPTS_KEPT_ON",
    "DAY_MS",
    "DEFINITIONS_KEPT",
    "HISTORY_SHOWN",
    "NEWEST_OF_A_TYPE_KEPT",
    "REMOVABLE_JOB_STATES",
    "RUNS_SHOWN",
    "UNTRIMMED_EVENTS",
    "CompactionPolicy",
    "finished_job_expired",
    "manual_key_expired",
    "newest_kept",
    "trimmed_versions",
]

DAY_MS: Final = 86_400_000
HISTORY_SHOWN: Final = 100
"""The enqueue history shows a schedule's newest 100 attempts: compaction keeps
at least those."""
RUNS_SHOWN: Final = 100
"""The run history shows a schedule's newest 100 runs: compaction keeps at least
those runs' jobs."""

DEFINITIONS_KEPT: Final = 100
"""A schedule's stream keeps its newest 100 definitions by default: each is a
whole snapshot, so its definition history reaches back that many changes."""

NEWEST_OF_A_TYPE_KEPT: Final = 1
"""A trimmed stream keeps the newest event of each type: it supersedes the older ones."""
ATTEMPTS_KEPT_ON: Final = SCHEDULE_PREFIX
"""Streams whose ids start with this (a schedule's) keep `attempts_per_schedule`
EnqueueAttempted and `definitions_per_schedule` ScheduleDefined rather than one."""

UNTRIMMED_EVENTS: Final[tuple[type[DomainEvent], ...]] = (*JOB_EVENTS, ManualRunRequested)
"""Events of streams that are never trimmed, only removed whole (jobs, manual-run
keys): a stream holding them is not examined for trimming."""

REMOVABLE_JOB_STATES: Final = frozenset(
    {JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.EXPIRED}
)
"""A job in one of these states is done for good, so its stream and rows may go once
past retention. A quarantined job is not: an operator may still retry it."""


@dataclass(frozen=True)
class CompactionPolicy:
    """How much compaction keeps (the defaults are the runtime's)."""

    attempts_per_schedule: int = HISTORY_SHOWN
    runs_per_schedule: int = RUNS_SHOWN
    finished_job_retention_ms: int = DAY_MS
    manual_key_retention_ms: int = 7 * DAY_MS
    definitions_per_schedule: int = DEFINITIONS_KEPT

    def __post_init__(self) -> None:
        if self.definitions_per_schedule < NEWEST_OF_A_TYPE_KEPT:
            raise ValueError(
                "definitions_per_schedule: a schedule keeps at least its newest definition"
            )
        if self.manual_key_retention_ms < DAY_MS:
            raise ValueError("manual_key_retention_ms: idempotency keys are kept at least 24 hours")
        if self.attempts_per_schedule < HISTORY_SHOWN:
            raise ValueError(
                f"attempts_per_schedule: the history keeps the newest {HISTORY_SHOWN} attempts"
            )
        if self.runs_per_schedule < RUNS_SHOWN:
            raise ValueError(f"runs_per_schedule: the run history keeps the newest {RUNS_SHOWN}")

    def finished_jobs_cutoff(self, now_ms: int) -> int:
        """Jobs last changed (finished) before this instant are past retention."""
        return now_ms - self.finished_job_retention_ms

    def manual_keys_cutoff(self, now_ms: int) -> int:
        """Manual-run keys recorded before this instant have expired."""
        return now_ms - self.manual_key_retention_ms


def newest_kept(policy: CompactionPolicy, stream_id: str, event_type: type[DomainEvent]) -> int:
    """How many of a trimmed stream's newest events of `event_type` compaction keeps."""
    if stream_id.startswith(ATTEMPTS_KEPT_ON):
        if event_type is EnqueueAttempted:
            return policy.attempts_per_schedule
        if event_type is ScheduleDefined:
            return policy.definitions_per_schedule
    return NEWEST_OF_A_TYPE_KEPT


def trimmed_versions(
    policy: CompactionPolicy,
    stream_id: str,
    events: Iterable[tuple[int, type[DomainEvent]]],
) -> list[int]:
    """The versions compaction deletes from a trimmed stream, given its events as
    (version, type) in any order: all but the newest `newest_kept` of each type."""
    seen: Counter[type[DomainEvent]] = Counter()
    doomed: list[int] = []
    for version, event_type in sorted(events, key=lambda event: event[0], reverse=True):
        seen[event_type] += 1
        if seen[event_type] > newest_kept(policy, stream_id, event_type):
            doomed.append(version)
    return sorted(doomed)


def finished_job_expired(
    policy: CompactionPolicy, state: str, updated_at_ms: int, now_ms: int
) -> bool:
    """Whether compaction removes this job (its stream and its rows) now."""
    return state in REMOVABLE_JOB_STATES and updated_at_ms < policy.finished_jobs_cutoff(now_ms)


def manual_key_expired(policy: CompactionPolicy, recorded_at_ms: int, now_ms: int) -> bool:
    """Whether compaction removes a manual-run key's event recorded at this instant."""
    return recorded_at_ms < policy.manual_keys_cutoff(now_ms)
