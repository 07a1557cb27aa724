"""Headgate's own error hierarchy.

Driver errors are translated into these at the storage adapter's edge, so
callers (the runtime, the API, the CLI) never depend on a database driver's
exception types or messages.
"""

from __future__ import annotations

from typing import Any


def _rebuilt(
    kind: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]
) -> BaseException:
    error = kind.__new__(kind, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class KeptWhole(Exception):
    """An exception that crosses a process boundary (pickle) as it was raised.

    Pickle rebuilds an exception by calling its class with its `args`, which an
    `__init__` that takes other arguments than its message refuses (Snooze takes
    seconds, ValidationError a field and a rule): this one is rebuilt from its
    args and attributes without calling `__init__` again. A handler run with
    `executor="process"` raises it in its child and the worker gets it whole.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (type(self), self.args, dict(self.__dict__)))


class HeadgateError(KeptWhole):
    """Base class of every error Headgate raises on purpose."""


class StoreError(HeadgateError):
    """The store rejected an operation for a reason not covered below."""


class StoreUnavailable(StoreError):
    """The store cannot be reached, or stayed locked past its busy timeout."""


class StoreClosed(StoreError):
    """Headgate.close() was called: this object writes no more (make a new one)."""


class ProjectionsRebuilding(StoreUnavailable):
    """Writes wait while projections are rebuilt, so nothing decides on half-built tables."""


class ConcurrencyConflict(StoreError):
    """A stream was not at the version the writer expected."""

    def __init__(self, stream_id: str | None, expected: int | None, actual: int | None) -> None:
        if stream_id is None:
            message = "a concurrent writer appended the same stream version first"
        else:
            message = f"stream {stream_id!r} is at version {actual}, not the expected {expected}"
        super().__init__(message)
        self.stream_id = stream_id
        self.expected = expected
        self.actual = actual


class ConstraintViolation(StoreError):
    """A database constraint rejected a write (a bug if validation let it through)."""


class LeaseLost(StoreError):
    """A write made under a lease found the lease held under another term."""


class StoreUnopenable(StoreUnavailable):
    """The URL names a place no store can be opened (a SQLite path whose directory
    is missing or read-only): a mistake in the URL, not an outage."""


class StoreNotFound(StoreError):
    """The URL names no Headgate store, and what was asked only reads one: it
    creates none (a typo must not leave an empty store behind)."""


class SchemaBehind(StoreError):
    """The store's schema is older than this Headgate's, and what was asked only
    reads: it migrates nothing (opening the store to write does)."""


class SchemaTooNew(StoreError):
    """The database was migrated by a newer Headgate than this one."""


class SchemaIncomplete(StoreError):
    """The store is at this Headgate's revision but lacks a table it needs (dropped
    by hand, or a restore of part of it): every read of that table fails."""


class DuplicateTickJobs(StoreError):
    """The store holds ticks with more than one job (made by enqueues that named a
    tick the scheduler had fired, before one job per tick was enforced): the
    migration that enforces it stops, and changes nothing, until they are resolved."""

    def __init__(self, message: str, duplicates: list[tuple[str, int, list[str]]]) -> None:
        super().__init__(message)
        self.duplicates = duplicates
        """(schedule id, tick ms, the ids of the jobs crediting it, oldest first)."""


class ValidationError(HeadgateError, ValueError):
    """Input was rejected before anything was written; the message names the field."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule


class NotFound(HeadgateError, LookupError):
    """The named schedule or job does not exist."""


class JobStateConflict(HeadgateError):
    """An operator action that the job's state does not allow (retry a pending job)."""


class AdmissionRejected(HeadgateError):
    """The admission gate refused a job (quarantined, or its queue is full)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class DuplicateJob(HeadgateError):
    """A pending job already holds the unique key."""

    def __init__(self, unique_key: str, job_id: str) -> None:
        super().__init__(f"unique_key {unique_key!r} is held by pending job {job_id}")
        self.unique_key = unique_key
        self.job_id = job_id


class TickHasJob(DuplicateJob):
    """An enqueue named a (schedule, tick) that already has its job: one job per tick.
    `job_id` is that job (whatever its state); nothing was written."""

    def __init__(self, schedule_id: str, tick_ms: int, job_id: str, unique_key: str) -> None:
        super().__init__(unique_key, job_id)
        self.args = (f"tick {tick_ms} of schedule {schedule_id!r} already has its job {job_id}",)
        self.schedule_id = schedule_id
        self.tick_ms = tick_ms


class JobFailed(HeadgateError):
    """A job waited for (`JobHandle.wait`) ended without a result: it failed (its
    last attempt's error), or was cancelled, expired or quarantined (`state`).

    `error_type` names the handler's exception as it is imported
    (`myapp.billing.PaymentDeclined`), `error_message` is its text and
    `traceback` where it was raised, as the job's newest attempt recorded them
    (None where nothing failed: a cancel)."""

    def __init__(
        self,
        job_id: str,
        state: str,
        error_type: str | None = None,
        error_message: str | None = None,
        traceback: str | None = None,
    ) -> None:
        what = f"{error_type}: {error_message}" if error_type is not None else state
        super().__init__(f"job {job_id} {state}: {what}")
        self.job_id = job_id
        self.state = state
        self.error_type = error_type
        self.error_message = error_message
        self.traceback = traceback


def error_type_of(error: BaseException) -> str:
    """`error`'s class, and the driver's class behind it when it was translated
    (`StoreUnavailable from OperationalError`): what a log line says a failure was."""
    cause = error.__cause__
    shown = type(error).__name__
    return shown if cause is None else f"{shown} from {type(cause).__name__}"
