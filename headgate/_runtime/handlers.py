"""Job handlers: what a host registers, and what each run of one is told.

A handler is a plain function of a `JobContext`, sync or async, registered
for a job kind with `Headgate.handler` (or `Headgate.periodic`, which also
declares the schedule). Its return value (plain JSON) is stored as the job's
result; what it raises fails the attempt, which is retried with backoff
until `max_attempts`.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from headgate._domain.admission import require_kind
from headgate._domain.job_rules import DEFAULT_MAX_ATTEMPTS, DEFAULT_TIMEOUT_MS
from headgate._domain.options import DEFAULT_PRIORITY, DEFAULT_QUEUE, PER_JOB_FIELDS, JobOptions
from headgate._domain.retry import DEFAULT_RETRY, Retry
from headgate._errors import ValidationError
from headgate._json import JsonValue
from headgate._model import PeriodicOrigin
from headgate._store.port import HandlerDeclaration


class Cancellation(threading.Event):
    """Whether a handler should stop, read as a bool and waitable.

    `if job.cancelled:` is true once it is set, as `job.cancelled.is_set()` is;
    `job.cancelled.wait(5)` sleeps up to five seconds, and wakes at once when it
    is set (a sleep a handler should end when told to)."""

    def __bool__(self) -> bool:
        return self.is_set()

    def __repr__(self) -> str:
        return f"Cancellation({self.is_set()})"


@dataclass(frozen=True)
class JobContext:
    """One run of a job, as its handler sees it. Made by Headgate only.

    `cancelled` becomes true when the handler should stop: its deadline passed,
    an operator cancelled the job, a newer tick cancelled it
    (`overlap="cancel_previous"`), or the worker is shutting down and gave the
    job back. A sync handler checks it in long loops (`if job.cancelled:
    return`) or sleeps on it (`job.cancelled.wait(seconds)`); an async one is
    cancelled. Whatever a handler returns after it is set is not recorded.
    """

    id: str
    kind: str
    queue: str
    payload: JsonValue
    attempt: int
    """1 for the first attempt; crashes do not count (see crash_count)."""
    max_attempts: int
    crash_count: int
    """Times a worker died running this job before: a handler may take care."""
    periodic_origin: PeriodicOrigin | None
    deadline_ms: int
    """When this attempt times out (store time, epoch ms)."""
    cancelled: Cancellation = field(default_factory=Cancellation, compare=False)
    snoozes: int = 0
    """Times its handler snoozed the job before (`headgate.Snooze`); attempts do not
    count them."""


Handler = Callable[[JobContext], Any]
Executor = Literal["thread", "process"]
EXECUTORS: Final = ("thread", "process")


HANDLER_DEFAULTS: Final = JobOptions(
    queue=DEFAULT_QUEUE,
    max_attempts=DEFAULT_MAX_ATTEMPTS,
    timeout_ms=DEFAULT_TIMEOUT_MS,
    priority=DEFAULT_PRIORITY,
)
"""Headgate's defaults for what a handler leaves unset."""


@dataclass(frozen=True)
class HandlerSpec:
    kind: str
    function: Handler
    options: JobOptions
    """Its jobs' defaults, every one set (what a job leaves None, these decide)."""
    retry: Retry = DEFAULT_RETRY
    """Which failed attempts are retried, and after how long."""
    executor: Executor = "thread"
    """Where a sync handler runs: a thread of the worker, or a child process
    (killed at its deadline, on a core of its own; see child_processes)."""
    source: Callable[..., Any] | None = None
    """The host's function, when `function` calls it for it (a task's: see
    `task_calls`): its module is what a child process imports."""

    @property
    def awaitable(self) -> bool:
        """Its jobs have handles someone may wait on (a task's: `JobHandle.wait`),
        so their ends are announced (`JOBS_ENDED`); a handler's are not: on
        PostgreSQL every commit that notifies takes one lock in turn."""
        return self.source is not None

    @property
    def defined_by(self) -> Callable[..., Any]:
        return self.function if self.source is None else self.source

    @property
    def queue(self) -> str:
        queue = self.options.queue
        assert queue is not None
        return queue

    @property
    def max_attempts(self) -> int:
        attempts = self.options.max_attempts
        assert attempts is not None
        return attempts

    @property
    def timeout_ms(self) -> int:
        timeout = self.options.timeout_ms
        assert timeout is not None
        return timeout

    @property
    def priority(self) -> int:
        priority = self.options.priority
        assert priority is not None
        return priority

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.function)


def handler_spec(
    kind: object,
    function: Handler,
    options: JobOptions,
    retry: Retry | None = None,
    executor: object = "thread",
    *,
    source: Callable[..., Any] | None = None,
) -> HandlerSpec:
    """A validated handler registration: `options` are its jobs' defaults (a
    per-job option such as run_at_ms is refused), `retry` its retry policy
    (None: the default), `executor` where it runs, `source` the host's function
    `function` calls (a task's); bad ones raise ValidationError."""
    if retry is not None and not isinstance(retry, Retry):
        raise ValidationError("retry", f"must be headgate.Retry, got {type(retry).__name__}")
    if not callable(function):
        raise ValidationError("handler", f"must be callable, got {type(function).__name__}")
    for per_job in PER_JOB_FIELDS:
        if getattr(options, per_job) is not None:
            raise ValidationError(per_job, "is set per job, not for every job of a handler")
    return HandlerSpec(
        require_kind(kind),
        function,
        options.under(HANDLER_DEFAULTS),
        retry or DEFAULT_RETRY,
        _checked_executor(executor, function if source is None else source),
        source,
    )


def require_executor(executor: object) -> Executor:
    if executor == "thread":
        return "thread"
    if executor == "process":
        return "process"
    raise ValidationError("executor", f"must be 'thread' or 'process', got {executor!r}")


def _checked_executor(executor: object, function: Callable[..., Any]) -> Executor:
    """A process handler's child imports it by name: it must be a sync function
    defined at the top level of a module."""
    chosen = require_executor(executor)
    if chosen == "thread":
        return chosen
    if inspect.iscoroutinefunction(function):
        raise ValidationError(
            "executor",
            "'process' runs sync handlers; an async handler runs on the worker's event loop",
        )
    name = getattr(function, "__qualname__", "")
    module = getattr(function, "__module__", None)
    if not inspect.isfunction(function) or module is None or "<" in name or "." in name:
        raise ValidationError(
            "executor",
            "'process' needs a function defined at the top level of a module, which its "
            f"child process imports by name; {name or function!r} is not one",
        )
    return chosen


class HandlerRegistry:
    """The handlers of one Headgate, by kind."""

    def __init__(self) -> None:
        self._by_kind: dict[str, HandlerSpec] = {}
        self._lock = threading.Lock()

    def add(self, spec: HandlerSpec) -> None:
        with self._lock:
            if spec.kind in self._by_kind:
                raise ValidationError("kind", f"a handler for {spec.kind!r} is already registered")
            self._by_kind[spec.kind] = spec

    def get(self, kind: str) -> HandlerSpec | None:
        return self._by_kind.get(kind)

    def kinds(self) -> frozenset[str]:
        return frozenset(self._by_kind)

    def child_modules(self) -> frozenset[str]:
        """The modules of the handlers that run in child processes (imported there)."""
        return frozenset(
            spec.defined_by.__module__
            for spec in self._by_kind.values()
            if spec.executor == "process"
        )

    def child_slots(self, capacity: Mapping[str, int]) -> int:
        """The most attempts of process handlers that can run at once in `capacity`."""
        queues = {spec.queue for spec in self._by_kind.values() if spec.executor == "process"}
        return sum(slots for queue, slots in capacity.items() if queue in queues)

    def timeouts_ms(self) -> dict[str, int]:
        """kind -> its jobs' default timeout (what a claim gives a job without its own)."""
        return {kind: spec.timeout_ms for kind, spec in self._by_kind.items()}

    def by_queue(self) -> Mapping[str, frozenset[str]]:
        """queue -> the kinds registered on it."""
        queues: dict[str, set[str]] = {}
        for spec in self._by_kind.values():
            queues.setdefault(spec.queue, set()).add(spec.kind)
        return {queue: frozenset(kinds) for queue, kinds in queues.items()}

    def declarations(self) -> list[HandlerDeclaration]:
        """Each handler's kind with the defaults it gives a job at enqueue, for the
        store to keep (`HandlerDeclarations`)."""
        return [
            HandlerDeclaration(
                spec.kind,
                spec.queue,
                spec.priority,
                spec.options.start_within_ms,
                spec.options.partition_key,
                spec.options.rate_class,
            )
            for spec in sorted(self._by_kind.values(), key=lambda spec: spec.kind)
        ]

    def __bool__(self) -> bool:
        return bool(self._by_kind)
