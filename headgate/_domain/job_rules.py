"""How a job's attempts end, as pure functions: retries, errors, results, crashes.

The worker pool and the rescuer call these to decide what to record; nothing
here performs I/O, so every rule is tested directly (tests/domain/test_job_rules.py).

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
import traceback
from collections.abc import Callable
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
MAX_TRACEBACK: Final = 16_000
"""Characters of a failed attempt's traceback kept with it (the middle is cut)."""
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
    traceback: str | None = None
    """Where it was raised, as Python prints it (the chain of exceptions that led
    to it, each with its frames: file, line, function, source line), bounded
    to MAX_TRACEBACK characters; without the exceptions' texts where the host
    keeps them out of the store."""


Redactor = Callable[[str], str]
"""The host's redaction of an error's text and traceback before they are stored
and logged (`Headgate(redact_errors=...)`): what a handler's code put in an
exception message (a payload's field, a token in a URL) is in both."""


def unredacted(text: str) -> str:
    """The default redaction: none."""
    return text


def error_record(
    error: BaseException, *, keep_messages: bool = True, redact: Redactor = unredacted
) -> ErrorRecord:
    """What a failed attempt stores of its exception: the type's qualified name,
    its traceback (`formatted_traceback`) and, unless the host keeps exception
    texts out of the store, the first MAX_ERROR_MESSAGE characters of its
    text; the text and the traceback through the host's `redact`.

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
    trace = formatted_traceback(error, keep_messages=keep_messages)
    trace = None if trace is None else bounded_traceback(redact(trace))
    if not keep_messages:
        return ErrorRecord(name, None, trace)
    text = redact(_text_of(error))
    if len(text) > MAX_ERROR_MESSAGE:
        text = text[: MAX_ERROR_MESSAGE - 1] + "…"
    return ErrorRecord(name, text, trace)


def _text_of(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:  # its __str__ is the host's code
        return f"<{type(error).__name__} whose text could not be read>"


CARRIED_TRACEBACK: Final = "_headgate_traceback"
"""The attribute on an exception that came back from a child process (pickle
drops `__traceback__`) holding its traceback as the child formatted it: with
the exceptions' texts, and without."""


def formatted_traceback(error: BaseException, *, keep_messages: bool = True) -> str | None:
    """The exception's traceback as Python prints it, chain included; without the
    exceptions' texts (their types only) when `keep_messages` is False. None for
    an exception never raised (it has no frames), unless a child process carried
    its traceback here."""
    carried = getattr(error, CARRIED_TRACEBACK, None)
    if isinstance(carried, tuple) and len(carried) == 2:
        text = carried[0] if keep_messages else carried[1]
        return text if isinstance(text, str) else None
    if error.__traceback__ is None and error.__cause__ is None and error.__context__ is None:
        return None
    return _formatted_chain(error, keep_messages=keep_messages)


_CAUSED: Final = "\nThe above exception was the direct cause of the following exception:\n\n"
_DURING: Final = "\nDuring handling of the above exception, another exception occurred:\n\n"


def _formatted_chain(error: BaseException, *, keep_messages: bool) -> str:
    """The chain as `traceback.format_exception` lays it out, without its column
    markers (Python 3.11 parses each frame's source line to place them, which
    tripled the cost of a failed attempt), each exception with its text, or by
    its type alone when `keep_messages` is False."""
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = error
    joint = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, joint))
        if current.__cause__ is not None:
            current, joint = current.__cause__, _CAUSED
        elif current.__context__ is not None and not current.__suppress_context__:
            current, joint = current.__context__, _DURING
        else:
            current = None
    parts: list[str] = []
    for raised, joint_after in reversed(chain):
        if raised.__traceback__ is not None:
            parts.append("Traceback (most recent call last):\n")
            frames = traceback.StackSummary.extract(traceback.walk_tb(raised.__traceback__))
            parts.extend(frames.format())
        parts.append(_exception_line(raised, keep_messages=keep_messages))
        parts.append(joint_after)
    return "".join(parts)


def _exception_line(raised: BaseException, *, keep_messages: bool) -> str:
    kind = type(raised)
    if not keep_messages:
        return f"{kind.__module__}.{kind.__qualname__}\n"
    try:
        return "".join(traceback.format_exception_only(raised))
    except Exception:  # its __str__ is the host's code
        return f"{kind.__module__}.{kind.__qualname__}: <its text could not be read>\n"


def bounded_traceback(text: str) -> str:
    """At most MAX_TRACEBACK characters: its start (where the chain begins) and its
    end (the innermost frames and the exception), and how much was cut between."""
    if len(text) <= MAX_TRACEBACK:
        return text
    head = MAX_TRACEBACK // 4
    tail = MAX_TRACEBACK - head - 64
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters of the traceback cut ...]\n{text[-tail:]}"


def stack_record(frames: str) -> str:
    """Where a handler was when its deadline passed (its thread's or task's stack),
    bounded as a traceback."""
    return bounded_traceback(f"The handler was here when its timeout passed:\n{frames}")


def timed_out_record(timeout_ms: int, stack: str | None = None) -> ErrorRecord:
    """What an attempt that ran past its deadline stores: the timeout its job was
    given, as configured, and where its handler was then, if known. (The time
    its handler had is a little less, since it starts after its claim; a figure
    like 1.961 s for a 2 s timeout reads as a different setting.)"""
    seconds = _seconds(timeout_ms)
    return ErrorRecord(
        "TimeoutError",
        f"the handler ran past its timeout of {seconds} s",
        None if stack is None else stack_record(stack),
    )


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
    schedule_id: str | None = None
    """The schedule whose run it is (see `RUN_EVENTS`)."""


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
                    job.job_id,
                    job.fingerprint,
                    crashes,
                    job.attempt,
                    job.claimed_at_ms,
                    job.schedule_id,
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
