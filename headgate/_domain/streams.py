"""Stream naming: which events live together and share one version sequence."""

from __future__ import annotations

import hashlib
from typing import Final

SCHEDULE_PREFIX: Final = "schedule-"
JOB_PREFIX: Final = "job-"
MANUAL_PREFIX: Final = "manual-"
QUARANTINE_PREFIX: Final = "quarantine-"
QUEUE_PREFIX: Final = "queue-"
LIMIT_PREFIX: Final = "limit-"
RATE_PREFIX: Final = "rate-"


def schedule_stream(schedule_id: str) -> str:
    return f"{SCHEDULE_PREFIX}{schedule_id}"


def job_stream(job_id: str) -> str:
    return f"{JOB_PREFIX}{job_id}"


def manual_run_stream(schedule_id: str, idempotency_key: str) -> str:
    """One stream per (schedule, key); hashed so any key fits the id column."""
    digest = hashlib.sha256(f"{schedule_id}\x00{idempotency_key}".encode()).hexdigest()
    return f"{MANUAL_PREFIX}{digest[:40]}"


def quarantine_stream(fingerprint: str) -> str:
    return f"{QUARANTINE_PREFIX}{fingerprint}"


def queue_stream(queue: str) -> str:
    return f"{QUEUE_PREFIX}{queue}"


def limit_stream(scope: str) -> str:
    """A concurrency limit's stream, by its scope (`limits.scope_of`)."""
    return f"{LIMIT_PREFIX}{scope}"


def rate_stream(rate_class: str) -> str:
    return f"{RATE_PREFIX}{rate_class}"


def prefix_upper_bound(prefix: str) -> str:
    """The smallest string greater than every string starting with `prefix`.

    `stream_id >= prefix AND stream_id < bound` selects a stream family by
    an index range instead of a LIKE scan.
    """
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)
