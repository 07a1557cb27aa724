"""Task objects: a function whose signature is its jobs' arguments.

    @hg.task("email.send", queue="mail")
    def send(to: str, when: datetime) -> str: ...

    send("ada@example.com", when)            # the plain function, here
    job = send.enqueue("ada@example.com", when)   # a job; the call checked now
    job.wait(timeout=10)                     # its result, or JobFailed
    send.configure(priority=5).enqueue(...)  # with enqueue's options

`Headgate.task` returns a `Task`; `Headgate.handler` keeps registering a
function of the `JobContext` alone, whose job's payload is any JSON. The
payload of a task's job is its arguments by name (`_runtime.task_calls`),
each encoded by `_domain.arguments`. mypy sees the arguments (a ParamSpec),
leaving out a first parameter annotated `JobContext`, which the job is given
when it runs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from typing_extensions import Unpack

from headgate._domain.arguments import decode
from headgate._domain.option_keywords import ENQUEUE_KEYWORDS, EnqueueArgs, job_options
from headgate._domain.options import JobOptions
from headgate._errors import JobFailed, ValidationError
from headgate._json import JsonValue
from headgate._model import Job
from headgate._projections import JobRow
from headgate._runtime.handlers import JobContext
from headgate._runtime.task_calls import TaskCall, TaskSignature

if TYPE_CHECKING:
    from headgate._core import Core

__all__ = ["JobHandle", "Task", "TaskDecorator"]

NO_OPTIONS = JobOptions()
"""A task's jobs' options until `configure` sets some: its handler's."""
P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


class JobHandle(Generic[R]):
    """A job a task enqueued: `wait` or `await_result` for what its function returned."""

    def __init__(self, core: Core, job: Job, returns: object) -> None:
        self._core = core
        self.job = job
        """The job as it was enqueued (`refresh()` reads it again)."""
        self._returns = returns

    @property
    def id(self) -> str:
        return self.job.id

    def __repr__(self) -> str:
        return f"<JobHandle {self.job.kind} {self.job.id}>"

    def refresh(self) -> Job:
        """The job as the store holds it now (`hg.jobs.get`)."""
        return self._core.get_job(self.job.id)

    def wait(self, timeout: float | None = None) -> R:
        """Block until the job ends and return its result, decoded to the task's
        return annotation; raise JobFailed when it failed, was cancelled, expired
        or was quarantined (with the newest attempt's error type, message and
        traceback), TimeoutError when it has not ended within `timeout` seconds
        (None: as long as it takes; the job carries on either way). Woken by
        the store's notifications, not by polling."""
        row = self._core.results.wait_for_end(self.job.id, timeout)
        return self._outcome(row)

    async def await_result(self, timeout: float | None = None) -> R:
        """`wait` for a coroutine: the event loop is not blocked while it waits."""
        row = await self._core.results.await_end(self.job.id, timeout, self._core.async_pool.run)
        if row.state == "completed":
            return self._outcome(row)
        attempts = await self._core.async_pool.run(lambda: self._core.get_job(self.job.id))
        raise _failure(row, attempts)

    def _outcome(self, row: JobRow) -> R:
        if row.state != "completed":
            raise _failure(row, self._core.get_job(row.job_id))
        stored = None if row.result is None else json.loads(row.result)
        result: R = decode(stored, self._returns, "result")  # type: ignore[assignment]
        return result


def _failure(row: JobRow, job: Job) -> JobFailed:
    newest = next((a for a in job.attempt_history if a.error_type is not None), None)
    if newest is None:
        return JobFailed(row.job_id, row.state)
    return JobFailed(
        row.job_id, row.state, newest.error_type, newest.error_message, newest.traceback
    )


class Task(Generic[F, P, R]):
    """A task: its function (call it as one), and its jobs' enqueue.

    `F` is the function's own type (what calling the task takes), `P` the
    arguments a job takes (the function's, less a first `JobContext`), `R` what
    waiting for a job gives (an async function's awaited result)."""

    if TYPE_CHECKING:
        __call__: F
    else:

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return self.function(*args, **kwargs)

    def __init__(
        self,
        core: Core,
        kind: str,
        function: F,
        call: TaskCall,
        options: JobOptions = NO_OPTIONS,
    ) -> None:
        self.kind = kind
        self.function = function
        self.call = call
        self.options = options
        """The per-job options `configure` set (None: the handler's)."""
        self._core = core
        self.__wrapped__ = function
        self.__doc__ = function.__doc__
        self.__name__ = getattr(function, "__name__", kind)
        self.__qualname__ = getattr(function, "__qualname__", kind)
        self.__module__ = getattr(function, "__module__", __name__)

    def __repr__(self) -> str:
        return f"<Task {self.kind} {self.call.signature.described}>"

    def __reduce__(self) -> tuple[Any, ...]:
        """By name: a process executor's child finds the task in its module."""
        return (_imported_task, (self.__module__, self.__qualname__))

    @property
    def signature(self) -> TaskSignature:
        return self.call.signature

    def payload(self, *args: P.args, **kwargs: P.kwargs) -> dict[str, JsonValue]:
        """The payload a job of this call carries (its arguments by name, encoded):
        for `hg.enqueue(task.kind, task.payload(...), connection=...)`."""
        return self.call.signature.payload(args, kwargs)

    def configure(self, **options: Unpack[EnqueueArgs]) -> Task[F, P, R]:
        """This task with enqueue's options for its jobs (`queue`, `priority`,
        `run_at_ms`, `unique_key`, `max_attempts`, `timeout_ms` or `timeout_s`,
        `start_within_ms`, `partition_key`, `rate_class`: `JobOptions`), over those
        configured before; the handler's defaults stay for what none sets."""
        given = JobOptions(**job_options(options, ENQUEUE_KEYWORDS))
        merged = given.under(self.options)
        return Task(self._core, self.kind, self.function, self.call, merged)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """Enqueue a job of this call. The arguments are checked here against the
        function's signature and encoded (ValidationError naming the argument);
        then the job is written as `Headgate.enqueue` writes one (DuplicateJob,
        AdmissionRejected)."""
        payload = self.call.signature.payload(args, kwargs)
        job = self._core.enqueue_job(self.kind, payload, self.options)
        return JobHandle(self._core, job, self.call.signature.returns)

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """`enqueue` for a coroutine (on the Headgate's thread pool, as `aenqueue`);
        the arguments are checked before it awaits."""
        payload = self.call.signature.payload(args, kwargs)
        job = await self._core.async_pool.run(
            lambda: self._core.enqueue_job(self.kind, payload, self.options)
        )
        return JobHandle(self._core, job, self.call.signature.returns)

    def enqueue_many(
        self, calls: Iterable[Mapping[str, Any] | tuple[Any, ...]]
    ) -> list[JobHandle[R]]:
        """Enqueue a job per call, in bulk (`Headgate.enqueue_many`): each call a
        mapping of keyword arguments or a tuple of positional ones. Every call is
        checked before anything is written (`jobs[3].when: ...`)."""
        chosen: dict[object, JobOptions] = {}
        new_jobs = [
            self._core.new_job(index, self._item(index, call), chosen, check=False)
            for index, call in enumerate(calls)
        ]
        jobs = self._core.enqueue_new_jobs(new_jobs)
        returns = self.call.signature.returns
        return [JobHandle(self._core, job, returns) for job in jobs]

    def _item(self, index: int, call: Mapping[str, Any] | tuple[Any, ...]) -> dict[str, object]:
        try:
            if isinstance(call, tuple):
                payload = self.call.signature.payload(call, {})
            elif isinstance(call, Mapping):
                payload = self.call.signature.payload((), call)
            else:
                raise ValidationError(
                    "call", f"must be a mapping or a tuple of arguments, got {type(call).__name__}"
                )
        except ValidationError as error:
            raise ValidationError(f"jobs[{index}].{error.field}", error.rule) from None
        given = {
            name: value
            for name, value in dataclasses.asdict(self.options).items()
            if value is not None
        }
        return {"kind": self.kind, "payload": payload, **given}


def _imported_task(module: str, qualname: str) -> object:
    import importlib  # noqa: PLC0415 (in a child process only)

    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


class TaskDecorator:
    """What `Headgate.task(kind, ...)` returns: registers the function it decorates."""

    def __init__(self, register: Callable[[Callable[..., Any]], Task[Any, Any, Any]]) -> None:
        self._register = register

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, function: Callable[Concatenate[JobContext, P], Coroutine[Any, Any, R]]
    ) -> Task[Callable[Concatenate[JobContext, P], Coroutine[Any, Any, R]], P, R]: ...
    @overload
    def __call__(
        self, function: Callable[Concatenate[JobContext, P], R]
    ) -> Task[Callable[Concatenate[JobContext, P], R], P, R]: ...
    @overload
    def __call__(
        self, function: Callable[P, Coroutine[Any, Any, R]]
    ) -> Task[Callable[P, Coroutine[Any, Any, R]], P, R]: ...
    @overload
    def __call__(self, function: Callable[P, R]) -> Task[Callable[P, R], P, R]: ...
    def __call__(self, function: Callable[..., Any]) -> Task[Any, Any, Any]:
        return self._register(function)
