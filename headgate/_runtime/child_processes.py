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
* The thread that runs the attempt waits on the child's pipe and its process.
  When the attempt is told to stop (its deadline passed, its job was
  cancelled, the worker gave it back), the child is killed with SIGKILL,
  with every process it started: each child leads a process group of its
  own, and the whole group is killed. Nothing it would have returned is
  recorded (the attempt has settled).
* A child that dies on its own (a signal, `os._exit`, the kernel's OOM killer)
  is a crash of its job, recorded as a worker's death would be: the crash
  count goes up, and the crash limit quarantines the job.
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

from headgate._json import JsonValue
from headgate._logs import get_logger
from headgate._runtime.handlers import JobContext

log = get_logger("headgate.workers")

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


@dataclass(frozen=True)
class _Request:
    function: Callable[[JobContext], Any]
    context: dict[str, Any]


class _Child:
    def __init__(self, process: BaseProcess, connection: Connection) -> None:
        self.process = process
        self.connection = connection
        self.jobs = 0

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
        """Close its pipe (an idle child exits at that) and reap it."""
        with contextlib.suppress(OSError):
            self.connection.close()
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
        child = self._take()
        try:
            child.connection.send(request)
        except (OSError, pickle.PicklingError, TypeError, AttributeError) as error:
            self._drop(child, kill=True)
            if isinstance(error, OSError):
                attempt.child_died(f"its child process could not be reached: {error}")
            else:
                attempt.handler_ended(error=error)
            return
        self._await(child, attempt)

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
            ready = wait([child.connection, child.process.sentinel], WATCH_INTERVAL_S)
            if cancelled.is_set():
                self._drop(child, kill=True)
                attempt.handler_killed()
                return
            if child.connection in ready:
                try:
                    answer = child.connection.recv()
                except (EOFError, OSError):
                    answer = None
                if answer is not None:
                    self._answered(child, attempt, answer)
                    return
            if child.connection in ready or child.process.sentinel in ready:
                child.process.join(timeout=1.0)
                code = child.process.exitcode
                self._drop(child, kill=False)
                attempt.child_died(_death(code))
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
        if not kept:
            self._drop(child, kill=False)
        if error is None:
            attempt.handler_ended(result=value)
        else:
            attempt.handler_ended(error=error)

    def _take(self) -> _Child:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self._started()

    def _started(self) -> _Child:
        self._context.set_forkserver_preload(self._preload)
        ours, theirs = self._context.Pipe()
        process = self._context.Process(
            target=serve_parent,
            args=(theirs, self._limits.memory_limit_mb),
            name="headgate-child",
            daemon=True,
        )
        process.start()
        theirs.close()
        with self._lock:
            self._alive += 1
        return _Child(process, ours)

    def _drop(self, child: _Child, *, kill: bool) -> None:
        """Retire (or kill) a child, and start another if fewer are alive than wanted."""
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


def serve_parent(connection: Connection, memory_limit_mb: int | None) -> None:
    """A child's life: run each handler its parent sends, answer, until the pipe
    closes. It leads a process group of its own, so that a kill reaches what
    its handlers start; Ctrl-C is the parent's to act on, so it ignores it."""
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if memory_limit_mb is not None:
        limit = memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    while True:
        try:
            request = connection.recv()
        except (EOFError, OSError):
            return
        connection.send(_answer(request))


def _answer(request: _Request) -> tuple[str, Any]:
    try:
        result = request.function(JobContext(**request.context))
    except BaseException as error:  # the host's code: whatever it raises is its answer
        return ("error", _exception_payload(error))
    try:
        pickle.dumps(result)
    except Exception as error:  # a result that cannot travel fails the attempt
        return ("error", _exception_payload(TypeError(f"its result cannot be sent back: {error}")))
    return ("result", result)


def _exception_payload(error: BaseException) -> tuple[bytes | None, str, str, str]:
    """The exception pickled if it comes back whole, and its class and text in any case."""
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
    return (pickled, kind.__module__, kind.__qualname__, text)


def _exception_from(payload: tuple[bytes | None, str, str, str]) -> BaseException:
    pickled, module, qualname, text = payload
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
