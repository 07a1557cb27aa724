"""One attempt at a job: its handler run with its JobContext, held to its
deadline, and its end as the event to record.

The worker pool and `drain()` both run handlers through this module, so an
attempt is timed, refused and recorded by one set of rules whoever runs it:

* What the handler returns is its result if it is plain JSON within the
  limit (`job_rules.checked_result`); what it raises fails the attempt
  (`job_rules.error_record`), an async handler's own CancelledError included.
* At its deadline, on the injected clock, the attempt times out: it settles
  as failed (`timed_out`, with the timeout as configured), its
  `job.cancelled` is set, an async handler is cancelled and a process
  handler's child killed. A sync handler's thread cannot be stopped: it is
  `overdue` until it returns, and whatever it returns is refused (the worker
  pool records the timeout only then: see `worker_pool`). A handler that
  returns at or after its deadline has timed out too, whether or not the
  `Deadlines` service had got to it.
* An attempt settles once: the first of its handler's end, its deadline and
  its withdrawal (given back at shutdown) decides what is recorded. A handler
  told to stop (`job.cancelled`: its job was cancelled or rescued meanwhile)
  has its outcome refused; its job is no longer this worker's.
* A handler registered with `executor="process"` runs in a child process
  (`child_processes`): killed when its attempt is told to stop, and a child
  that dies without an answer settles the attempt as a crash (`Outcome.crashed`).
* Ctrl-C (KeyboardInterrupt on the main thread, where Python raises it) in a
  handler that `drain()` runs there stops the drain and records nothing: the
  person at the terminal stopped the process, the handler did not fail.

Who runs the handler stays the caller's choice: the pool's threads and event
loop, or `AttemptRunner.run_here` in `drain()`'s calling thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from headgate import _tracing as tracing
from headgate._clock import Clock
from headgate._domain.job_rules import (
    DEFAULT_MAX_RESULT_BYTES,
    ErrorRecord,
    InvalidResult,
    Redactor,
    checked_result,
    error_record,
    timed_out_record,
    unredacted,
)
from headgate._json import JsonValue
from headgate._logs import get_logger
from headgate._runtime import job_units
from headgate._runtime.child_processes import ChildLimits, ChildPool
from headgate._runtime.config import WorkerConfig
from headgate._runtime.deadlines import Deadlines
from headgate._runtime.handlers import HandlerSpec, JobContext
from headgate._runtime.job_units import Claim
from headgate._runtime.recorder import NO_METRICS, Recorder
from headgate._runtime.snooze import DEFAULT_MAX_SNOOZES, Snooze, SnoozeLimitExceeded
from headgate._runtime.task_calls import ArgumentsRefused
from headgate._store.port import StreamAppend

log = get_logger("headgate.workers")


@dataclass(frozen=True)
class AttemptRules:
    """What an attempt's end keeps (from the host's WorkerConfig)."""

    store_error_messages: bool = True
    """False keeps exception texts out of the store (the type is kept, and the
    traceback's frames)."""
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    max_snoozes: int = DEFAULT_MAX_SNOOZES
    redact: Redactor = unredacted
    """The host's redaction of error texts and tracebacks (`Headgate(redact_errors=)`)."""

    @classmethod
    def of(cls, config: WorkerConfig, redact: Redactor = unredacted) -> AttemptRules:
        return cls(config.store_error_messages, config.max_result_bytes, config.max_snoozes, redact)


@dataclass(frozen=True)
class Outcome:
    """How an attempt ended: its result, or what failed it."""

    ended_at_ms: int
    """When its handler returned, or its deadline was found passed."""
    result: JsonValue = None
    error: ErrorRecord | None = None
    timed_out: bool = False
    snooze_ms: int | None = None
    """Set when its handler snoozed the job (`Snooze`): due again this long after
    its end is recorded."""
    gives_up: bool = False
    """It failed with an error its handler's retry policy does not retry: the job
    fails now, whatever attempts it has left."""
    crashed: str | None = None
    """Set when the child process running its handler died without an answer (why,
    in words): recorded as a crash of its job, as a worker's death is."""


EndListener = Callable[["Attempt", Outcome | None], None]
"""Told when an attempt settles with an outcome to record, or with None when its
handler returned after the attempt was settled (or told to stop): its thread is
free, and nothing more is recorded. Called on the handler's thread or the
deadline service's, never under a lock of the attempt's."""


def job_context(claim: Claim) -> JobContext:
    """What the handler is told of its job and this attempt."""
    return JobContext(
        id=claim.job_id,
        kind=claim.kind,
        queue=claim.queue,
        payload=claim.payload,
        attempt=claim.attempt,
        max_attempts=claim.max_attempts,
        crash_count=claim.crash_count,
        periodic_origin=claim.periodic_origin,
        deadline_ms=claim.deadline_ms,
        snoozes=claim.snoozes,
    )


class Attempt:
    """One claimed job's run, from its start to its settlement."""

    def __init__(
        self,
        claim: Claim,
        spec: HandlerSpec,
        clock: Clock,
        rules: AttemptRules,
        on_end: EndListener,
    ) -> None:
        self.claim = claim
        self.spec = spec
        self.context = job_context(claim)
        self.started_at_ms = clock.now_ms()
        self._clock = clock
        self._rules = rules
        self._on_end = on_end
        self._lock = threading.Lock()
        self._outcome: Outcome | None = None
        self._settled = False
        self._returned = False
        self.returned_at_ms = 0
        """When its handler's code returned (0 until it has)."""
        self.killed = False
        """Its handler's child process was killed (told to stop, at its deadline)."""
        self._cancel_task: Callable[[], None] | None = None
        self._thread_id: int | None = None
        """The thread a sync handler runs on here, while it runs."""
        self._task: asyncio.Task[None] | None = None
        """An async handler's task, while it runs."""

    @property
    def deadline_ms(self) -> int:
        return self.claim.deadline_ms

    @property
    def settled(self) -> bool:
        """Its outcome is decided (or it was withdrawn): its slot is free."""
        return self._settled

    @property
    def returned(self) -> bool:
        """Its handler's code has returned: no thread or task of it runs."""
        return self._returned

    @property
    def overdue(self) -> bool:
        """Timed out while its handler still runs (a sync handler's thread is held)."""
        outcome = self._outcome
        return outcome is not None and outcome.timed_out and not self._returned

    @property
    def outcome(self) -> Outcome | None:
        """What to record; None until settled, and for a withdrawn attempt."""
        return self._outcome

    # running the handler ----------------------------------------------------

    @contextlib.contextmanager
    def traced(self) -> Iterator[None]:
        """Its span, around the handler's run (`_tracing`), told how it ended."""
        claim = self.claim
        origin = claim.periodic_origin
        with tracing.attempt_span(
            kind=claim.kind,
            queue=claim.queue,
            job_id=claim.job_id,
            attempt=claim.attempt,
            first=claim.first_run,
            carried=claim.trace_context,
            origin=None if origin is None else (origin.schedule_id, origin.tick_ms),
        ) as span:
            try:
                yield
            finally:
                tracing.attempt_ended(span, *_traced_outcome(self._outcome))

    def run(self) -> None:
        """Run a sync handler here, to its end."""
        with self.traced():
            self._run()

    def _run(self) -> None:
        self._thread_id = threading.get_ident()
        try:
            result = self.spec.function(self.context)
        except BaseException as error:  # the host's code: whatever it raises fails the attempt
            if _is_ctrl_c(error):
                self.withdraw()
                raise
            self._handler_ended(error=error)
            return
        self._handler_ended(result=result)

    async def run_async(self) -> None:
        """Run an async handler on the running loop, to its end or its cancellation."""
        with self.traced():
            await self._run_async()

    async def _run_async(self) -> None:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        self._task = task
        if task is not None:

            def cancel() -> None:
                loop.call_soon_threadsafe(task.cancel)

            with self._lock:
                self._cancel_task = cancel
                if self.context.cancelled.is_set():
                    # Told to stop before it started: cancelled at its first await, as
                    # a running one is (and not at all if it finishes without one).
                    loop.call_soon(task.cancel)
        try:
            result = await self.spec.function(self.context)
        except asyncio.CancelledError as error:
            if _cancelled_from_outside(task, self.context):
                self.withdraw()
                raise
            self._handler_ended(error=error)
            return
        except BaseException as error:  # the host's code: whatever it raises fails the attempt
            if _is_ctrl_c(error):
                self.withdraw()
                raise
            self._handler_ended(error=error)
            return
        self._handler_ended(result=result)

    # told by the child process that runs it (child_processes.ChildPool) ------

    def handler_ended(
        self, *, result: JsonValue = None, error: BaseException | None = None
    ) -> None:
        """Its handler, in a child, returned `result` or raised `error`."""
        self._handler_ended(result=result, error=error)

    def handler_killed(self) -> None:
        """Its child was killed because it was told to stop: nothing to record."""
        with self._lock:
            self._returned = True
            self.killed = True
            self.returned_at_ms = self._clock.now_ms()
        self._on_end(self, None)

    def child_died(self, why: str) -> None:
        """Its child died without an answer: a crash, unless it had settled."""
        outcome = Outcome(self._clock.now_ms(), crashed=why)
        with self._lock:
            self._returned = True
            self.returned_at_ms = outcome.ended_at_ms
            refused = self._settled or self.context.cancelled.is_set()
            if not refused:
                self._settled = True
                self._outcome = outcome
        self._on_end(self, None if refused else outcome)

    # settling -----------------------------------------------------------------

    def expire(self) -> None:
        """Its deadline passed: time it out and tell it to stop, unless it settled."""
        outcome = self._timed_out(self._clock.now_ms(), self._stack_now())
        with self._lock:
            if self._settled:
                return
            self._settled = True
            self._outcome = outcome
            self._tell_to_stop()
        self._on_end(self, outcome)

    def withdraw(self) -> bool:
        """Settle it with nothing to record (its job is given back) and tell it to
        stop; False if it had settled already."""
        with self._lock:
            if self._settled:
                return False
            self._settled = True
            self._tell_to_stop()
        return True

    def stop(self) -> None:
        """Its job is no longer this worker's (cancelled, rescued): tell it to stop.
        Its outcome will be refused; its deadline still times it out."""
        with self._lock:
            self._tell_to_stop()

    def _tell_to_stop(self) -> None:
        """Under the lock, so a task is cancelled before its loop can close."""
        self.context.cancelled.set()
        if self._cancel_task is not None:
            self._cancel_task()

    def _handler_ended(
        self, *, result: JsonValue = None, error: BaseException | None = None
    ) -> None:
        now = self._clock.now_ms()
        outcome = self._outcome_of(result, error, now)
        with self._lock:
            self._returned = True
            self.returned_at_ms = now
            refused = self._settled or self.context.cancelled.is_set()
            if not refused:
                self._settled = True
                self._outcome = outcome
                if outcome.timed_out:
                    self.context.cancelled.set()
        self._on_end(self, None if refused else outcome)

    def _outcome_of(self, result: JsonValue, error: BaseException | None, now_ms: int) -> Outcome:
        if now_ms >= self.claim.deadline_ms:
            return self._timed_out(now_ms)
        keep = self._rules.store_error_messages
        redact = self._rules.redact
        if isinstance(error, Snooze):
            if self.claim.snoozes < self._rules.max_snoozes:
                return Outcome(now_ms, snooze_ms=error.delay_ms)
            error = SnoozeLimitExceeded(
                f"snoozed {self.claim.snoozes} times already; the limit is "
                f"{self._rules.max_snoozes} (WorkerConfig.max_snoozes)"
            )
        if isinstance(error, InvalidResult):  # a child's handler's result, checked there
            return Outcome(now_ms, error=error_record(error, keep_messages=keep, redact=redact))
        if error is not None:
            return Outcome(
                now_ms,
                error=error_record(error, keep_messages=keep, redact=redact),
                gives_up=isinstance(error, ArgumentsRefused) or not self.spec.retry.retries(error),
            )
        try:
            return Outcome(now_ms, result=checked_result(result, self._rules.max_result_bytes))
        except InvalidResult as invalid:
            return Outcome(now_ms, error=error_record(invalid, keep_messages=keep, redact=redact))

    def _stack_now(self) -> str | None:
        """Where its handler is, if it runs here and has not returned: its thread's
        stack, or its task's (a process handler's child is not looked into)."""
        if self._returned:
            return None
        try:
            if self._thread_id is not None:
                frame = sys._current_frames().get(self._thread_id)
                return None if frame is None else "".join(traceback.format_stack(frame))
            task = self._task
            if task is not None and not task.done():
                frames = task.get_stack()
                summaries = traceback.StackSummary.extract(
                    (frame, frame.f_lineno) for frame in frames
                )
                return "".join(summaries.format())
        except Exception:  # a stack that cannot be read is left out, not fatal
            return None
        return None

    def _timed_out(self, now_ms: int, stack: str | None = None) -> Outcome:
        stack = None if stack is None else self._rules.redact(stack)
        return Outcome(
            now_ms,
            error=timed_out_record(self.claim.timeout_ms, stack),
            timed_out=True,
            gives_up=not self.spec.retry.retries(TimeoutError()),
        )


def end_append(
    attempt: Attempt, outcome: Outcome, worker_id: str, recorded_at_ms: int
) -> StreamAppend:
    """The event that records the attempt's end; a failure's retry is counted from
    `recorded_at_ms`, when the end is written."""
    if outcome.snooze_ms is not None:
        return job_units.snoozed(
            attempt.claim, worker_id, attempt.started_at_ms, recorded_at_ms + outcome.snooze_ms
        )
    if outcome.error is None:
        return job_units.succeeded(attempt.claim, worker_id, attempt.started_at_ms, outcome.result)
    return job_units.failed(
        attempt.claim,
        worker_id,
        attempt.started_at_ms,
        outcome.error,
        recorded_at_ms,
        timed_out=outcome.timed_out,
        retry=attempt.spec.retry,
        gives_up=outcome.gives_up,
    )


def _traced_outcome(outcome: Outcome | None) -> tuple[str, str | None]:
    """How a span tells an attempt's end: its outcome and its error's type."""
    if outcome is None:
        return "not recorded", None
    if outcome.crashed is not None:
        return "crashed", "ChildProcessError"
    if outcome.snooze_ms is not None:
        return "snoozed", None
    if outcome.error is not None:
        return ("timed_out" if outcome.timed_out else "failed"), outcome.error.error_type
    return "succeeded", None


def _is_ctrl_c(error: BaseException) -> bool:
    return isinstance(error, KeyboardInterrupt) and (
        threading.current_thread() is threading.main_thread()
    )


def _cancelled_from_outside(task: asyncio.Task[None] | None, context: JobContext) -> bool:
    """Its task was cancelled, but not by its attempt (which tells the job to stop
    first): asyncio.run's Ctrl-C, or its loop shutting down."""
    return task is not None and task.cancelling() > 0 and not context.cancelled.is_set()


def _ignore(attempt: Attempt, outcome: Outcome | None) -> None:
    """The default listener: drain() reads each outcome once `run_here` returns."""


class AttemptRunner:
    """Starts attempts and holds each to its deadline: one for the worker pool,
    one per `drain()`.

    `on_end` hears of every settlement (see EndListener); the runner forgets
    the attempt's deadline and logs what a person should know first.
    """

    def __init__(
        self,
        clock: Clock,
        rules: AttemptRules,
        *,
        on_end: EndListener = _ignore,
        recorder: Recorder = NO_METRICS,
        name: str = "headgate-deadlines",
        children: ChildPool | None = None,
    ) -> None:
        self._clock = clock
        self._rules = rules
        self._on_end = on_end
        self._recorder = recorder
        self._deadlines = Deadlines(clock, name=name)
        self._children = children or ChildPool(ChildLimits())

    def start(self) -> None:
        self._deadlines.start()

    def stop(self) -> None:
        """Stop timing attempts out (those still running are the caller's to give
        back: a child running one is killed when it is), and the idle children."""
        self._deadlines.stop()
        self._children.close()

    def begin(self, claim: Claim, spec: HandlerSpec) -> Attempt:
        """An attempt at a claimed job, its deadline watched from now; its handler
        is the caller's to run (`Attempt.run` or `run_async`, or `run_here`)."""
        attempt = Attempt(claim, spec, self._clock, self._rules, self._ended)
        self._recorder.handler_started(
            claim.queue, claim.kind, max(attempt.started_at_ms - claim.run_at_ms, 0)
        )
        self._deadlines.watch(attempt)
        return attempt

    def run_here(self, attempt: Attempt) -> Outcome | None:
        """Run its handler in the calling thread (an async one on an event loop of
        its own, a process one in a child this thread waits for), and say how it
        ended: None if it was withdrawn meanwhile."""
        if attempt.spec.is_async:
            _run_on_a_loop_of_its_own(attempt)
        elif attempt.spec.executor == "process":
            with attempt.traced():
                self._children.run(attempt.spec.function, attempt)
        else:
            attempt.run()
        return attempt.outcome

    def withdraw(self, attempt: Attempt) -> bool:
        """Give it back: nothing is recorded of it (see Attempt.withdraw)."""
        self._deadlines.forget(attempt)
        return attempt.withdraw()

    def _ended(self, attempt: Attempt, outcome: Outcome | None) -> None:
        self._deadlines.forget(attempt)
        _log_settlement(attempt, outcome)
        self._on_end(attempt, outcome)


def _run_on_a_loop_of_its_own(attempt: Attempt) -> None:
    """An async handler's attempt on a new event loop: in this thread, or, when this
    thread runs a loop already (`drain()` or an eager enqueue called from a
    coroutine), on a thread of its own this one waits for, as one loop cannot run
    inside another."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(attempt.run_async())
        return
    failures: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(attempt.run_async())
        except BaseException as error:  # raised again in the caller
            failures.append(error)

    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(run,), name="headgate-async-attempt")
    thread.start()
    thread.join()
    if failures:
        raise failures[0]


def _log_settlement(attempt: Attempt, outcome: Outcome | None) -> None:
    """One line a person should read first: a deadline passed, and what became of
    a handler that ran on past it."""
    claim = attempt.claim
    fields = {
        "job_id": claim.job_id,
        "kind": claim.kind,
        "attempt": claim.attempt,
        **job_units.origin_fields(claim),
    }
    timed_out = attempt.outcome is not None and attempt.outcome.timed_out
    if outcome is not None and outcome.timed_out:
        if attempt.spec.executor == "process":
            log.warning(
                "handler ran past its timeout; its child process is killed and the attempt "
                "recorded timed_out",
                timeout_ms=claim.timeout_ms,
                **fields,
            )
        elif attempt.returned:
            log.warning(
                "handler returned past its timeout; its attempt is recorded timed_out and "
                "what it returned is dropped",
                timeout_ms=claim.timeout_ms,
                **fields,
            )
        else:
            log.warning(
                "handler ran past its timeout and is told to stop (job.cancelled); its job "
                "stays running, overdue, until it returns, then the attempt is recorded "
                "timed_out",
                timeout_ms=claim.timeout_ms,
                **fields,
            )
    elif outcome is None and timed_out and not attempt.killed:
        log.info(
            "an overdue handler returned; its attempt is recorded timed_out and what it "
            "returned is dropped",
            overran_ms=max(attempt.returned_at_ms - claim.deadline_ms, 0),
            **fields,
        )
    elif outcome is None and not timed_out:
        log.info(
            "a handler stopped after its job was taken from this worker (cancelled, "
            "rescued or given back); nothing is recorded of it",
            **fields,
        )
