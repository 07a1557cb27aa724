"""How a job's attempts end, as pure functions: retries, errors, results, crashes.

The worker pool and the rescuer call these to decide what to record; nothing
here performs I/O, so every rule is tested directly (tests/test_job_rules.py).

Crash counting, decided here and documented in docs/explanation/guarantees.md:

* A job counts its own crashes (`crash_count`), apart from failed attempts. A
  job whose worker dies under it `crash_limit` times (default 3) is
  quarantined, and its fingerprint (kind + payload) with it.
* A fingerprint is also blamed for crashes across all its jobs, so a poison
  payload that a schedule enqueues anew on every tick is caught after about
  `crash_limit` crashes in all, not that many per tick. A worker that dies
  running k jobs spreads one crash over them: each job's fingerprint takes
  1/k. Once a fingerprint's blame reaches `crash_limit`, it is quarantined
  (with the job that crashed last).
* A completed job clears its fingerprint's blame: what killed the workers
  beside its earlier jobs was not its payload.
* So one crash never quarantines anything (crash_limit is at least 2), and an
  innocent job killed beside the real culprit takes only its share.
* The rescue that quarantines a job also quarantines its fingerprint's jobs
  still waiting to run (the rescuer does, in the same write): a crash loop's
  backlog would otherwise crash a worker each.
* A job given back at shutdown (released) is never a crash: rolling deploys
  quarantine nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Final

from headgate._domain.events import (
    DomainEvent,
    FingerprintCrashBlamed,
    FingerprintQuarantined,
    JobAbandoned,
    JobQuarantined,
)
from headgate._domain.retry import DEFAULT_RETRY, Retry
from headgate._errors import KeptWhole
from headgate._json import JsonValue, canonical_json

DEFAULT_MAX_ATTEMPTS: Final = 25
DEFAULT_TIMEOUT_MS: Final = 30 * 60_000
DEFAULT_CRASH_LIMIT: Final = 3
MAX_ERROR_MESSAGE: Final = 1_000
"""Characters of an exception's text kept on the job (the rest is cut)."""
DEFAULT_MAX_RESULT_BYTES: Final = 64 * 1024
BLAME_UNIT: Final = 1_000
"""Blame is counted in thousandths of a crash."""


def retry_delay_ms(job_id: str, attempt: int) -> int:
    """Delay before retrying after failed attempt number `attempt`, under the
    default policy (`retry.DEFAULT_RETRY`): doubling from 1 s, capped at an
    hour, with jitter in [50%, 100%) so jobs that failed together do not retry
    together. The jitter is derived from the job and the attempt, so whoever
    computes it (a retry of the write, a test) gets the same delay."""
    return DEFAULT_RETRY.wait_ms(job_id, attempt)


def next_run_after_failure(
    job_id: str, attempt: int, max_attempts: int, now_ms: int, retry: Retry = DEFAULT_RETRY
) -> int | None:
    """When the job runs again after failed attempt `attempt` under `retry`; None
    when that was its last (it has failed)."""
    if attempt >= max_attempts:
        return None
    return now_ms + retry.wait_ms(job_id, attempt)


@dataclass(frozen=True)
class ErrorRecord:
    error_type: str
    message: str | None


def error_record(error: BaseException, *, keep_messages: bool = True) -> ErrorRecord:
    """What a failed attempt stores of its exception: the type's qualified name and,
    unless the host keeps exception texts out of the store, the first
    MAX_ERROR_MESSAGE characters of its text.

    The name is the one users know it by, which the API, the CLI and the console
    show: a builtin's bare (`ValueError`), a Headgate type's as the package
    exports it (`headgate.InvalidResult`, not the internal module it is defined
    in; the package, loaded before any of its modules, is read from
    `sys.modules`, not imported), any other's module and qualified name."""
    kind = type(error)
    module = kind.__module__
    name = f"{module}.{kind.__qualname__}"
    if module == "builtins":
        name = kind.__qualname__
    elif (
        module.startswith("headgate.")
        and getattr(sys.modules.get("headgate"), kind.__qualname__, None) is kind
    ):
        name = f"headgate.{kind.__qualname__}"
    if not keep_messages:
        return ErrorRecord(name, None)
    text = str(error)
    if len(text) > MAX_ERROR_MESSAGE:
        text = text[: MAX_ERROR_MESSAGE - 1] + "…"
    return ErrorRecord(name, text)


def timed_out_record(timeout_ms: int) -> ErrorRecord:
    """What an attempt that ran past its deadline stores: the timeout its job was
    given, as configured. (The time its handler had is a little less, since it
    starts after its claim; a figure like 1.961 s for a 2 s timeout reads as a
    different setting.)"""
    seconds = _seconds(timeout_ms)
    return ErrorRecord("TimeoutError", f"the handler ran past its timeout of {seconds} s")


def _seconds(milliseconds: int) -> str:
    """Milliseconds as seconds, exact, without trailing zeros: 2000 -> "2", 1500 -> "1.5"."""
    whole, rest = divmod(milliseconds, 1000)
    return str(whole) if rest == 0 else f"{whole}.{rest:03d}".rstrip("0")


class InvalidResult(KeptWhole):
    """A handler returned what the store cannot keep: the attempt fails with this."""


def checked_result(value: JsonValue, max_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> JsonValue:
    """The handler's return value, if it is plain JSON within the size limit;
    raises InvalidResult naming the rule otherwise."""
    try:
        text = canonical_json(value)
    except (TypeError, ValueError, RecursionError) as error:
        raise InvalidResult(
            f"the handler returned {type(value).__name__}, which is not plain JSON "
            f"(objects, arrays, strings, finite numbers, booleans, null): {error}"
        ) from None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise InvalidResult(
            f"the handler's result is {size} bytes as JSON; the limit is {max_bytes}"
        )
    return value


@dataclass(frozen=True)
class CrashedJob:
    """A job running on a worker whose heartbeat expired."""

    job_id: str
    worker_id: str
    fingerprint: str
    crash_count: int
    """Its crashes before this one."""
    version: int
    """Its stream's version: the rescue appends at it."""
    attempt: int | None = None
    """The attempt it was running (its claim's number), recorded with the crash."""
    claimed_at_ms: int | None = None
    """When that attempt was claimed: the crashed attempt's start."""


def rescue(
    jobs: list[CrashedJob],
    blame_milli: dict[str, int],
    crash_limit: int,
    already_quarantined: frozenset[str],
) -> list[tuple[CrashedJob, tuple[DomainEvent, ...], tuple[DomainEvent, ...]]]:
    """What to record for the jobs of one dead worker: per job, its own events
    (abandoned, or quarantined) and its fingerprint's (the blame, and a
    quarantine when the blame reaches the limit).

    `blame_milli` is each fingerprint's blame before this crash; it is updated
    as the jobs are decided (two jobs of one fingerprint on one worker share).
    """
    if not jobs:
        return []
    share = BLAME_UNIT // len(jobs)
    quarantined = set(already_quarantined)
    decided = []
    for job in jobs:
        crashes = job.crash_count + 1
        blame = blame_milli.get(job.fingerprint, 0) + share
        blame_milli[job.fingerprint] = blame
        fingerprint_events: list[DomainEvent] = [
            FingerprintCrashBlamed(job.fingerprint, job.job_id, blame)
        ]
        by_job = crashes >= crash_limit
        by_fingerprint = blame >= crash_limit * BLAME_UNIT
        if by_job or by_fingerprint:
            job_events: tuple[DomainEvent, ...] = (
                JobQuarantined(
                    job.job_id, job.fingerprint, crashes, job.attempt, job.claimed_at_ms
                ),
            )
            if job.fingerprint not in quarantined:
                quarantined.add(job.fingerprint)
                why = (
                    f"crash limit: job {job.job_id} crashed its worker {crashes} times"
                    if by_job
                    else f"crash limit: jobs of this kind and payload crashed their workers "
                    f"{blame / BLAME_UNIT:g} times (last: job {job.job_id})"
                )
                fingerprint_events.append(FingerprintQuarantined(job.fingerprint, why[:255]))
        else:
            job_events = (
                JobAbandoned(job.job_id, job.worker_id, crashes, job.attempt, job.claimed_at_ms),
            )
        decided.append((job, job_events, tuple(fingerprint_events)))
    return decided
