"""Child processes that run the sync handlers registered with
`executor="process"`, one attempt at a time each.

Why children: a thread cannot be stopped, and threads share one GIL with the
scheduler. A child can be killed at its handler's deadline (its slot is free
at once), can be held to a memory limit, and runs on a core of its own.

* Children start from multiprocessing's forkserver, a clean process, never
  by forking this one: a fork of a process with threads inherits their locks
  in whatever state they were (and its store connections). So a handler is
  passed by reference, and its module is imported in the child: it must be a
  module-level function, and the module's top level must not start anything.
* A child is kept for the next attempt, up to `max_jobs_per_child`, then
  replaced; one that raised MemoryError is replaced too.
* The thread that runs the attempt waits on the child's pipe.
  When the attempt is told to stop (its deadline passed, its job was
  cancelled, the worker gave it back), the child is killed with SIGKILL,
  with every process it started: each child leads a process group of its
  own, and the whole group is killed. Nothing it would have returned is
  recorded (the attempt has settled).
* A child that dies on its own (a signal, `os._exit`, the kernel's OOM killer)
  is a crash of its job, recorded as a worker's death would be: the crash
  count goes up, and the crash limit quarantines the job. Its death is its
  end of the pipe closing (the forkserver, which reports exit codes, may be
  gone while the child lives). An idle child found dead is replaced, not
  blamed on the next job.
* A child outlives neither its worker nor a stop signal meant for it: it
  holds a lifeline, a pipe only its worker writes to, and kills itself and
  its group when that closes (the worker died, even by SIGKILL), so a job
  rescued from a dead worker is never run twice at once. It ignores SIGTERM
  and SIGINT, which a supervisor sends a whole group or cgroup at a deploy:
  its worker's graceful stop decides what happens to its job.
* What the handler raises comes back pickled, so a retry policy matches its
  class. An exception that does not survive pickling comes back as an
  instance of its own class made without its __init__, or, if even that
  fails, as a `ChildProcessError` naming it.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import pickle
import resource
import signal
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, Final, Protocol

from headgate._domain.job_rules import (
    CARRIED_TRACEBACK,
    DEFAULT_MAX_RESULT_BYTES,
    InvalidResult,
    bounded_traceback,
    checked_result,
    formatted_traceback,
)
from headgate._json import JsonValue
from headgate._logs import get_logger
from headgate._runtime.handlers import JobContext

log = get_logger("headgate.workers")
CHILD_START_WAIT_S: Final = 10.0
"""How long a worker's start waits for the first child of process handlers to be
ready, so that the first attempts' timeouts are not spent starting one."""

WATCH_INTERVAL_S: Final = 0.02
"""How often a waiting attempt looks whether it was told to stop."""


@dataclass(frozen=True)
class ChildLimits:
    """What each child is held to (from the host's WorkerConfig)."""

    max_jobs_per_child: int | None = None
    """Attempts a child runs before it is replaced; None: no limit."""
    memory_limit_mb: int | None = None
    """The child's address space (RLIMIT_AS) in MiB; beyond it allocations raise
    MemoryError in the handler. None: no limit."""
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    """A result is checked against this in the child, so that one too large
    never crosses to the worker (InvalidResult, as for a thread's handler)."""


class ChildAttempt(Protocol):
    """What a child runs and tells: an attempt (`attempts.Attempt`)."""

    @property
    def context(self) -> JobContext: ...

    def handler_ended(
        self, *, result: JsonValue = None, error: BaseException | None = None
    ) -> None:
        """Its handler returned `result` or raised `error`."""

    def handler_killed(self) -> None:
        """Its child was killed because it was told to stop."""

    def child_died(self, why: str) -> None:
        """Its child died without an answer: a crash."""

    def withdraw(self) -> bool:
        """Give it back unrecorded (the caller was interrupted)."""


@dataclass(frozen=True)
class _Request:
    function: Callable[[JobContext], Any]
    context: dict[str, Any]


class _Child:
    def __init__(self, process: BaseProcess, connection: Connection, lifeline: Connection) -> None:
        self.process = process
        self.connection = connection
        self.lifeline = lifeline
        """Never written to: the child kills itself when it closes."""
        self.jobs = 0
        self.dropped = False

    def kill(self) -> None:
        """SIGKILL the child's process group (the processes its handler started
        too), then the child itself: it may not lead its group yet."""
        if self.process.pid is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(OSError, ValueError):
            self.process.kill()
        self.retire()

    def retire(self) -> None:
        """Close its pipes (an idle child exits at that) and reap it."""
        with contextlib.suppress(OSError):
            self.connection.close()
        with contextlib.suppress(OSError):
            self.lifeline.close()
        self.process.join(timeout=1.0)
        if self.process.is_alive():
            with contextlib.suppress(OSError, ValueError):
                self.process.kill()
            self.process.join(timeout=1.0)


class ChildPool:
    """The children of one worker pool (or drain): started as needed, or kept
    ready (`warm`), each one attempt at a time."""

    def __init__(self, limits: ChildLimits, preload: Iterable[str] = ()) -> None:
        self._limits = limits
        self._context = multiprocessing.get_context("forkserver")
        self._preload = sorted({"headgate", *preload} - {"__main__"})
        """Imported once in the forkserver, so that a child starts in milliseconds."""
        self._idle: list[_Child] = []
        self._alive = 0
        """Children started and not yet retired, idle or busy."""
        self._wanted = 0
        """Children to keep alive (`warm`): one is started when one is retired."""
        self._filling = False
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        """Told when a child becomes idle."""
        self._closed = False

    def run(self, function: Callable[[JobContext], Any], attempt: ChildAttempt) -> None:
        """Run `function`, the attempt's handler, in a child, and tell the attempt
        how it ended; returns when it has (the calling thread waits)."""
        request = _Request(function, _fields_of(attempt.context))
        try:
            child = self._sent(request)
        except (pickle.PicklingError, TypeError, AttributeError) as error:
            attempt.handler_ended(error=error)  # its payload or its handler cannot travel
            return
        except OSError as error:
            attempt.handler_ended(error=ChildProcessError(f"no child process to run it: {error}"))
            return
        except BaseException:
            attempt.withdraw()
            raise
        try:
            self._await(child, attempt)
        except Exception as error:  # a fault of this side, not the handler's: it fails the attempt
            self._drop(child, kill=True)
            attempt.handler_ended(error=error)
        except BaseException:  # Ctrl-C in a drain: the job is given back, its child killed
            self._drop(child, kill=True)
            attempt.withdraw()
            raise

    def _sent(self, request: _Request) -> _Child:
        """A child that took `request`. One whose pipe broke (it died idle) is
        replaced once, not blamed on the job."""
        for tries_left in (1, 0):
            child = self._take()
            try:
                child.connection.send(request)
            except OSError:
                self._drop(child, kill=True)
                if tries_left:
                    continue
                raise
            except BaseException:
                self._drop(child, kill=True)
                raise
            return child
        raise AssertionError("unreachable")

    def warm(self, count: int, *, wait_s: float = 0.0) -> None:
        """Keep `count` children alive from now on, started in the background: the
        first attempts, and each after a child is killed or replaced, then find
        one ready (a handler's timeout counts from its claim). `wait_s`: wait up
        to this long for the first to be ready (the forkserver's own start, once
        per process, takes a second or so)."""
        if count <= 0:
            return
        self._start_filling(count)
        if wait_s > 0:
            with self._ready:
                self._ready.wait_for(lambda: bool(self._idle) or self._closed, wait_s)

    def _start_filling(self, count: int) -> None:
        with self._lock:
            self._wanted = max(self._wanted, count)
            if self._filling or self._closed or self._alive >= self._wanted:
                return
            self._filling = True
        threading.Thread(target=self._fill, name="headgate-children", daemon=True).start()

    def close(self) -> None:
        """Stop the idle children; a busy one is killed when its attempt is given back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._ready.notify_all()
        for child in idle:
            self._drop(child, kill=False)

    def _await(self, child: _Child, attempt: ChildAttempt) -> None:
        cancelled = attempt.context.cancelled
        while True:
            ready = wait([child.connection], WATCH_INTERVAL_S)
            if cancelled.is_set():
                self._drop(child, kill=True)
                attempt.handler_killed()
                return
            if not ready:
                continue
            try:
                answer = child.connection.recv()
            except (EOFError, OSError):
                child.process.join(timeout=1.0)
                code = child.process.exitcode
                self._drop(child, kill=True)
                attempt.child_died(_death(code))
                return
            except Exception as error:  # an answer this process cannot load
                self._drop(child, kill=True)
                attempt.handler_ended(error=TypeError(f"its answer could not be read: {error}"))
                return
            self._answered(child, attempt, answer)
            return

    def _answered(self, child: _Child, attempt: ChildAttempt, answer: tuple[str, Any]) -> None:
        child.jobs += 1
        tag, value = answer
        error = None if tag == "result" else _exception_from(value)
        most = self._limits.max_jobs_per_child
        spent = isinstance(error, MemoryError) or (most is not None and child.jobs >= most)
        kept = not spent
        if kept:
            with self._lock:
                kept = not self._closed
                if kept:
                    self._idle.append(child)
        # The attempt is told before a spent child is reaped, which can take a
        # while: its end is its handler's, not its child's exit.
        if error is None:
            attempt.handler_ended(result=value)
        else:
            attempt.handler_ended(error=error)
        if not kept:
            self._drop(child, kill=False)

    def _take(self) -> _Child:
        """An idle child (one found dead meanwhile is replaced), or a new one."""
        while True:
            with self._lock:
                child = self._idle.pop() if self._idle else None
            if child is None:
                return self._started()
            if not child.dropped and _answers(child):
                return child
            self._drop(child, kill=True)

    def _started(self) -> _Child:
        self._context.set_forkserver_preload(self._preload)
        ours, theirs = self._context.Pipe()
        life_read, life_write = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=serve_parent,
            args=(theirs, life_read, self._limits),
            name="headgate-child",
            daemon=True,
        )
        try:
            process.start()
        except BaseException:
            for end in (ours, life_write):
                end.close()
            raise
        finally:
            theirs.close()
            life_read.close()
        with self._lock:
            self._alive += 1
        return _Child(process, ours, life_write)

    def _drop(self, child: _Child, *, kill: bool) -> None:
        """Retire (or kill) a child, and start another if fewer are alive than
        wanted; once per child."""
        with self._lock:
            if child.dropped:
                return
            child.dropped = True
        if kill:
            child.kill()
        else:
            child.retire()
        with self._lock:
            self._alive -= 1
            wanted = self._wanted
        if wanted:
            self._start_filling(wanted)

    def _fill(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._closed or self._alive >= self._wanted:
                        return
                child = self._started()
                with self._lock:
                    if not self._closed:
                        self._idle.append(child)
                        self._ready.notify_all()
                        continue
                self._drop(child, kill=False)
                return
        except OSError:
            log.warning("could not start a child process for handlers", exc_info=True)
        finally:
            with self._lock:
                self._filling = False


def _fields_of(context: JobContext) -> dict[str, Any]:
    return {
        "id": context.id,
        "kind": context.kind,
        "queue": context.queue,
        "payload": context.payload,
        "attempt": context.attempt,
        "max_attempts": context.max_attempts,
        "crash_count": context.crash_count,
        "periodic_origin": context.periodic_origin,
        "deadline_ms": context.deadline_ms,
        "snoozes": context.snoozes,
    }


def _answers(child: _Child) -> bool:
    """Whether an idle child's end of the pipe is open (a dead one's reads as
    closed: ready, and nothing to read)."""
    try:
        return not child.connection.poll(0)
    except (EOFError, OSError):
        return False


def _death(exitcode: int | None) -> str:
    if exitcode is None:
        return "its child process stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"its child process was killed by {name}"
    return f"its child process exited with status {exitcode}"


# the child's side ---------------------------------------------------------------


def serve_parent(connection: Connection, lifeline: Connection, limits: ChildLimits) -> None:
    """A child's life: run each handler its parent sends, answer, until the pipe
    closes. It leads a process group of its own, so that a kill reaches what
    its handlers start; stop signals are its parent's to act on, so it ignores
    them; and it dies with its group when its lifeline closes."""
    os.setpgid(0, 0)
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, signal.SIG_IGN)
    threading.Thread(target=_die_with_parent, args=(lifeline,), daemon=True).start()
    if limits.memory_limit_mb is not None:
        limit = limits.memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    while True:
        try:
            request = connection.recv()
        except (EOFError, OSError):
            return
        except Exception as error:  # a request it cannot load (its handler's module): the answer
            connection.send(("error", _exception_payload(error)))
            continue
        connection.send(_answer(request, limits.max_result_bytes))


def _die_with_parent(lifeline: Connection) -> None:
    """Wait for the lifeline to close (nothing is ever sent on it), then kill
    this child's group: its parent is gone, and no one else would stop it."""
    with contextlib.suppress(EOFError, OSError):
        lifeline.recv()
    with contextlib.suppress(OSError):
        os.killpg(os.getpgid(0), signal.SIGKILL)
    os._exit(1)


def _answer(request: _Request, max_result_bytes: int) -> tuple[str, Any]:
    """The handler's result, checked here (plain JSON within the limit: what
    travels back is then small and always loads), or what it raised."""
    try:
        result = request.function(JobContext(**request.context))
    except BaseException as error:  # the host's code: whatever it raises is its answer
        return ("error", _exception_payload(error))
    try:
        return ("result", checked_result(result, max_result_bytes))
    except InvalidResult as invalid:
        return ("error", _exception_payload(invalid))


ExceptionPayload = tuple[bytes | None, str, str, str, tuple[str | None, str | None]]
"""An exception as it travels back: pickled (None if it does not come back whole),
its class's module and qualified name, its text, and its traceback formatted
here (with the exceptions' texts, and without), which pickle would drop."""


def _exception_payload(error: BaseException) -> ExceptionPayload:
    """The exception pickled if it comes back whole, and its class, text and
    traceback in any case."""
    kind = type(error)
    try:
        text = str(error)
    except Exception:  # its __str__ is the host's code
        text = ""
    pickled: bytes | None
    try:
        pickled = pickle.dumps(error)
        pickle.loads(pickled)
    except Exception:  # then it comes back by class and text
        pickled = None
    traces = (
        _bounded(formatted_traceback(error, keep_messages=True)),
        _bounded(formatted_traceback(error, keep_messages=False)),
    )
    return (pickled, kind.__module__, kind.__qualname__, text, traces)


def _bounded(trace: str | None) -> str | None:
    return None if trace is None else bounded_traceback(trace)


def _exception_from(payload: ExceptionPayload) -> BaseException:
    error = _exception_made(payload)
    with contextlib.suppress(Exception):  # an exception that takes no attributes
        setattr(error, CARRIED_TRACEBACK, payload[4])
    return error


def _exception_made(payload: ExceptionPayload) -> BaseException:
    pickled, module, qualname, text, _ = payload
    if pickled is not None:
        with contextlib.suppress(Exception):
            error = pickle.loads(pickled)
            if isinstance(error, BaseException):
                return error
    with contextlib.suppress(Exception):
        kind: Any = importlib.import_module(module)
        for part in qualname.split("."):
            kind = getattr(kind, part)
        if isinstance(kind, type) and issubclass(kind, BaseException):
            made = kind.__new__(kind)
            BaseException.__init__(made, text)
            str(made)
            return made
    return ChildProcessError(f"{module}.{qualname}: {text}")
