"""What a worker says of an attempt's end, and who else is told of it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from headgate._domain.events import JobAttemptFailed
from headgate._logs import get_logger
from headgate._runtime.job_units import Claim, origin_fields

log = get_logger("headgate.workers")

RunSettled = Callable[[Claim, object], None]
"""Told of each attempt end a worker recorded: its claim and its event."""


def nobody_told(claimed: Claim, end: object) -> None:
    """No one to tell of attempt ends."""


def log_attempt_end(
    claimed: Claim,
    event: object,
    outcome: str,
    duration_ms: int | None,
    *,
    log_successes: bool,
) -> None:
    """A failed attempt at WARNING, with its error's type and text (never the
    payload); a job that has now failed for good at ERROR; the rest (succeeded,
    snoozed, given back) at INFO when `log_successes`, else DEBUG: a busy worker
    writes no line per job by default."""
    fields: dict[str, object] = {
        "job_id": claimed.job_id,
        "kind": claimed.kind,
        "queue": claimed.queue,
        "attempt": claimed.attempt,
        "outcome": outcome,
        "duration_ms": duration_ms,
        **origin_fields(claimed),
    }
    if isinstance(event, JobAttemptFailed):
        fields.update(
            error_type=event.error_type, error=event.error_message, traceback=event.traceback
        )
        if event.retry_at_ms is None:
            log.error("job failed: its last attempt failed", **fields)
        else:
            log.warning(
                "job attempt failed; it is retried", retry_at_ms=event.retry_at_ms, **fields
            )
    elif log_successes:
        log.info("job attempt ended", **fields)
    else:
        log.debug("job attempt ended", **fields)


def log_what_stop_waits_for(running: Sequence[Claim], left_s: float) -> None:
    """A stop waiting for running jobs says which, and how long it waits still."""
    if running:
        log.info(
            "stopping: waiting for running jobs to finish, then giving back the rest",
            running=len(running),
            kinds=sorted({claim.kind for claim in running}),
            job_ids=[claim.job_id for claim in running[:10]],
            seconds_left=round(left_s),
        )
