"""How a schedule is doing, from its newest runs and its own row, at an instant.

A run's outcome comes from its history row (`projections.schedule_runs`) once
settled; until then from its job, the one record of whether it has started
(claims are not events). From the newest runs, newest first:

* `paused`: an operator paused it (whatever its runs did);
* `missing`: a tick has been due for longer than the grace and none fired:
  nobody holds the scheduler duty, or it is behind (`scheduler_watch`);
* `failing`: its newest settled run failed (failed, expired or quarantined;
  a cancelled run counts neither way), `consecutive_failures` in a row;
* `late`: a tick's job has waited longer than the grace without starting;
* `ok`: none of these.

The first that holds is the state. The grace is the scheduler watch's (two
lease lifetimes, at least ten seconds): a takeover may hold ticks that long
without anything being wrong.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

__all__ = [
    "FAILED_OUTCOMES",
    "RECENT_RUNS",
    "AlertKind",
    "HealthState",
    "RunFacts",
    "ScheduleHealth",
    "alert_on_settle",
    "failures_in_a_row",
    "health_of",
    "run_outcome",
]

RECENT_RUNS: Final = 100
"""Runs a schedule's health is read from: its newest (what the history keeps)."""


class HealthState(StrEnum):
    OK = "ok"
    FAILING = "failing"
    LATE = "late"
    MISSING = "missing"
    PAUSED = "paused"


_SETTLED: Final = frozenset({"succeeded", "failed", "expired", "cancelled", "quarantined"})
FAILED_OUTCOMES: Final = frozenset({"failed", "expired", "quarantined"})
_COUNTED: Final = FAILED_OUTCOMES | {"succeeded"}
"""Settled outcomes that say whether a schedule fails (a cancel says neither)."""
_BY_JOB_STATE: Final = {
    "pending": "enqueued",
    "running": "running",
    "completed": "succeeded",
    "failed": "failed",
    "cancelled": "cancelled",
    "expired": "expired",
    "quarantined": "quarantined",
}


def run_outcome(run_state: str, job_state: str | None) -> str:
    """What became of a run, in the run history's words: its settled state, else
    its job's (`enqueued` while waiting, `running` once started); `retrying`
    while a failed attempt waits to run again; a run whose job is gone and
    never settled here (written before runs were recorded) stays `enqueued`."""
    if run_state in _SETTLED or (run_state == "retrying" and job_state != "running"):
        return run_state
    if job_state is None:
        return run_state
    return _BY_JOB_STATE.get(job_state, run_state)


@dataclass(frozen=True)
class RunFacts:
    """One run as health reads it."""

    outcome: str
    """`run_outcome`."""
    tick_ms: int | None
    enqueued_at_ms: int
    started_at_ms: int | None
    finished_at_ms: int | None
    error_type: str | None

    @property
    def duration_ms(self) -> int | None:
        """How long its last attempt ran, once it ended."""
        if self.started_at_ms is None or self.finished_at_ms is None:
            return None
        if self.outcome not in ("succeeded", "failed", "retrying"):
            return None
        return max(0, self.finished_at_ms - self.started_at_ms)


@dataclass(frozen=True)
class ScheduleHealth:
    state: HealthState
    consecutive_failures: int
    """Settled runs in a row, newest first, that failed (cancelled ones skipped)."""
    last_success_ms: int | None
    last_failure_ms: int | None
    last_error_type: str | None
    """The newest failed run's error type (None for an expiry or a quarantine)."""
    duration_p50_ms: int | None
    duration_p95_ms: int | None
    """Of the recent runs that ran to an end."""
    runs_read: int
    """How many recent runs these figures come from (at most RECENT_RUNS)."""


def health_of(
    runs: Sequence[RunFacts],
    *,
    paused: bool,
    due_at_ms: int | None,
    now_ms: int,
    grace_ms: int,
) -> ScheduleHealth:
    """A schedule's health from its newest runs (newest first) and its row:
    `due_at_ms` is when its next tick is due (None: none is left)."""
    consecutive = failures_in_a_row(run.outcome for run in runs)
    last_success = last_failure = None
    last_error: str | None = None
    durations: list[int] = []
    late = False
    for run in runs:
        if run.duration_ms is not None:
            durations.append(run.duration_ms)
        if run.outcome == "succeeded":
            if last_success is None:
                last_success = run.finished_at_ms
        elif run.outcome in FAILED_OUTCOMES:
            if last_failure is None:
                last_failure, last_error = run.finished_at_ms, run.error_type
        elif run.outcome == "enqueued" and run.tick_ms is not None:
            late = late or now_ms - run.tick_ms > grace_ms
    if paused:
        state = HealthState.PAUSED
    elif due_at_ms is not None and now_ms - due_at_ms > grace_ms:
        state = HealthState.MISSING
    elif consecutive:
        state = HealthState.FAILING
    elif late:
        state = HealthState.LATE
    else:
        state = HealthState.OK
    return ScheduleHealth(
        state=state,
        consecutive_failures=consecutive,
        last_success_ms=last_success,
        last_failure_ms=last_failure,
        last_error_type=last_error,
        duration_p50_ms=_percentile(durations, 50),
        duration_p95_ms=_percentile(durations, 95),
        runs_read=len(runs),
    )


def _percentile(values: list[int], percent: int) -> int | None:
    """The nearest-rank percentile (None of nothing)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


class AlertKind(StrEnum):
    FAILURE = "failure"
    """The schedule's runs have now failed `after_failures` times in a row."""
    RECOVERY = "recovery"
    """A run succeeded after at least `after_failures` failures in a row."""


def failures_in_a_row(outcomes: Iterable[str]) -> int:
    """Runs that failed, newest first, before the newest that succeeded; runs that
    did not settle either way (waiting, running, cancelled) are passed over."""
    failures = 0
    for outcome in outcomes:
        if outcome == "succeeded":
            break
        failures += outcome in FAILED_OUTCOMES
    return failures


def alert_on_settle(
    settled: Sequence[tuple[str, str]], job_id: str, after_failures: int
) -> AlertKind | None:
    """Whether the run of `job_id` settling changed a schedule's state for a hook
    that fires after `after_failures` failures in a row: `settled` is the
    schedule's newest runs as (job id, outcome), newest first. Each change is
    told once: by the run that makes it, and only while no newer run has
    settled (that one tells what it changes)."""
    counted = [(run, outcome) for run, outcome in settled if outcome in _COUNTED]
    if not counted or counted[0][0] != job_id:
        return None
    streak_before = failures_in_a_row(outcome for _, outcome in counted[1:])
    if counted[0][1] in FAILED_OUTCOMES:
        return AlertKind.FAILURE if streak_before + 1 == after_failures else None
    return AlertKind.RECOVERY if streak_before >= after_failures else None
