"""The ends of attempts whose child process died (`executor="process"`): each
recorded as a crash, as a worker's death is (crash count, quarantine at the
crash limit), the job alone to blame."""

from __future__ import annotations

from collections.abc import Sequence

from headgate._logs import get_logger
from headgate._runtime.attempts import Attempt
from headgate._runtime.job_units import origin_fields
from headgate._runtime.recorder import Recorder
from headgate._runtime.rescuer import Rescuer
from headgate._store.port import WriteTransaction

log = get_logger("headgate.workers")


def record_child_crashes(
    transaction: WriteTransaction, rescuer: Rescuer, holder: str, crashed: Sequence[Attempt]
) -> set[str]:
    """Record, in this transaction, a crash of each of these attempts' jobs still
    running on `holder` in that attempt; the ids of the jobs recorded (one
    cancelled or rescued meanwhile is not). `rescuer.report_crashes` logs and
    counts them once committed."""
    ids = {attempt.claim.job_id: attempt.claim.attempt for attempt in crashed}
    rows = [
        row
        for row in transaction.running_on([holder])
        if row.job_id in ids and row.attempts + 1 == ids[row.job_id]
    ]
    rescuer.take_back_crashed(transaction, rows)
    return {row.job_id for row in rows}


def report_child_crash(attempt: Attempt, recorded: bool, recorder: Recorder) -> bool:
    """Say what became of a crashed attempt once its write committed; whether it
    counts a crash (`recorded`: its job was still this attempt's)."""
    claimed = attempt.claim
    if not recorded:
        log.info(
            "a handler's child process died after its job had moved on; nothing is recorded",
            job_id=claimed.job_id,
            kind=claimed.kind,
            attempt=claimed.attempt,
        )
        return False
    recorder.attempt_ended(claimed.queue, claimed.kind, "crashed", None)
    log.warning(
        "a handler's child process died running its job; the job counts a crash",
        job_id=claimed.job_id,
        kind=claimed.kind,
        attempt=claimed.attempt,
        why=attempt.outcome.crashed if attempt.outcome is not None else None,
        **origin_fields(claimed),
    )
    return True
