"""A job's lifecycle: its states, and what each operator action needs.

The one table every surface reads: the commands refuse an action from any
other state (`refusal`), the API documents it, and the console and the CLI
offer an action only where it is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final


class JobState(StrEnum):
    PENDING = "pending"
    """Waiting for its run_at and a worker (also after a retry, a release or a rescue)."""
    RUNNING = "running"
    """Claimed by a worker, whose heartbeat keeps it."""
    COMPLETED = "completed"
    FAILED = "failed"
    """Out of attempts (or finished as failed by a host consuming outside Headgate)."""
    CANCELLED = "cancelled"
    QUARANTINED = "quarantined"
    """Crashed its worker too often: held, with its fingerprint, until an operator acts."""
    EXPIRED = "expired"
    """Not started by its start deadline (`start_within_ms`): it never ran, and runs
    only if an operator retries it."""


class AttemptOutcome(StrEnum):
    """How one row of a job's attempt history ended (`Job.attempt_history`)."""

    SUCCEEDED = "succeeded"
    """Its handler returned."""
    FAILED = "failed"
    """Its handler raised (or its result was refused); retried while attempts remain."""
    TIMED_OUT = "timed_out"
    """Its handler was still running at its timeout; counts as a failure."""
    SNOOZED = "snoozed"
    """Its handler asked to run again later (`Snooze`); the attempt is not counted."""
    RELEASED = "released"
    """Its worker stopped and gave the job back unfinished; not counted."""
    CRASHED = "crashed"
    """Its worker died (heartbeat expired or process gone) and a rescue took it back."""
    QUARANTINED = "quarantined"
    """Its worker died once too often for this fingerprint: the job is held."""
    RETRIED = "retried"
    """An operator retried the job; the numbers after it start again from 1."""


STARTED_OUTCOMES: Final = frozenset(AttemptOutcome) - {AttemptOutcome.RETRIED}
"""Outcomes of attempts that started (a retry's row is not one)."""

FAILED_OUTCOMES: Final = frozenset(
    {
        AttemptOutcome.FAILED,
        AttemptOutcome.TIMED_OUT,
        AttemptOutcome.CRASHED,
        AttemptOutcome.QUARANTINED,
    }
)
"""Outcomes that count as a failed attempt."""

UNFINISHED_STATES: Final = frozenset({JobState.PENDING, JobState.RUNNING})
"""States in which a job holds its unique key and counts against its queue's limit."""


class JobAction(StrEnum):
    """What an operator (or a host) may do to one job."""

    CANCEL = "cancel"
    """Stop it: a pending one never runs, a running one's handler is told to stop."""
    RETRY = "retry"
    """Run it again now, its attempt and crash counts reset (its history stays)."""
    FINISH = "finish"
    """Mark it finished, for a host that consumes jobs outside Headgate."""


ACTION_NEEDS: Final[Mapping[JobAction, frozenset[JobState]]] = {
    JobAction.CANCEL: UNFINISHED_STATES,
    JobAction.RETRY: frozenset(
        {JobState.FAILED, JobState.CANCELLED, JobState.QUARANTINED, JobState.EXPIRED}
    ),
    JobAction.FINISH: frozenset({JobState.PENDING}),
}
"""The states each action may start from."""

BULK_MAX: Final = 1_000
"""The most jobs one bulk retry or cancel changes: one write of that many events
stays short; more matching jobs are left for the next call (its `more`)."""

FINISHED_AS: Final = (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED)
"""The states a host may finish a job as (`JobAction.FINISH`)."""


def allows(action: JobAction, state: str) -> bool:
    """Whether `action` may be taken on a job in `state`."""
    return state in ACTION_NEEDS[action]


def needs_text(action: JobAction) -> str:
    """The states an action needs, as a sentence's end: "a pending or running job"."""
    *others, last = sorted(state.value for state in ACTION_NEEDS[action])
    states = f"{', '.join(others)} or {last}" if others else last
    return f"a {states} job"


def refusal(action: JobAction, job_id: str, state: str) -> str | None:
    """Why `action` is refused for a job in `state`, or None when it is allowed."""
    if allows(action, state):
        return None
    needs = needs_text(action)
    return f"cannot {action.value} job {job_id}: it is {state} ({action.value} needs {needs})"
