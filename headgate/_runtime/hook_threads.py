"""Threads for the host's hooks: calls with a time budget, and a queue for after-hooks.

Hooks are host code and will sometimes be slow (an HTTP call, a lock). No
thread of the runtime's own waits for one longer than its budget:

* `BudgetedCalls` runs each call on a reusable daemon helper thread and waits
  up to the budget. A call still running then is abandoned: a thread cannot be
  killed, so its helper goes on running it, counted as stuck until it returns,
  and what it eventually returns or raises is ignored. While a call made for a
  key (a schedule) is stuck, further calls for that key are refused at once
  (as over budget): a hook hung for one schedule holds one thread, and the
  retries of that schedule's tick add none, while other schedules' calls go on.
  Past `max_stuck` stuck threads in all, every call is refused, so hung host
  code never piles up threads. Helpers are daemons: a hung hook never blocks
  shutdown.
* `HookQueue` hands work to one daemon worker thread through a bounded queue,
  in order; when it is full, work is dropped (and counted in a warning) rather
  than making the caller wait.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Generic, TypeVar

from headgate._logs import get_logger

log = get_logger("headgate.scheduler")
T = TypeVar("T")

MAX_STUCK: Final = 64
"""Hook calls abandoned past their budget and still running, at most, before
further calls are refused outright (one per schedule whose hook is hung)."""
EMPTY: Final[Mapping[str, object]] = MappingProxyType({})
CANCEL_POLL_S: Final = 0.02
"""How often a wait for a hook looks whether the runtime is stopping."""
MAX_IDLE: Final = 4
"""Idle helper threads kept for reuse; more exit once their call returns."""


@dataclass(frozen=True)
class CallOutcome:
    finished: bool
    """False: still running at its budget (abandoned), or refused (too many stuck)."""
    elapsed_ms: int
    error: BaseException | None = None
    """What the call raised, when it finished by raising."""
    refused: bool = False
    """Not even started: an earlier call for the same key, or `MAX_STUCK` earlier
    calls in all, are still hung."""


class _Call:
    def __init__(
        self, fn: Callable[[], object], about: Mapping[str, object], key: str | None
    ) -> None:
        self.fn = fn
        self.about = about
        self.key = key
        self.began = time.perf_counter()
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.abandoned = False


class BudgetedCalls:
    """Runs calls on helper threads, waiting for each at most its budget."""

    def __init__(self, name: str = "headgate-hook", max_stuck: int = MAX_STUCK) -> None:
        self._name = name
        self._max_stuck = max_stuck
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[_Call | None]] = []
        self._stuck = 0
        self._stuck_keys: dict[str, int] = {}
        self._started = 0
        self._closed = False

    @property
    def stuck(self) -> int:
        """Calls abandoned past their budget that have not returned yet."""
        with self._lock:
            return self._stuck

    def call(
        self,
        fn: Callable[[], object],
        budget_s: float,
        about: Mapping[str, object] = EMPTY,
        cancel: threading.Event | None = None,
        key: str | None = None,
    ) -> CallOutcome:
        """Run `fn` on a helper thread; wait up to `budget_s` for it, or until
        `cancel` is set (then it is abandoned at once). `about` names the call in
        the line logged if it returns after being abandoned; `key` (a schedule
        id) is refused while an earlier call for it is stuck."""
        work = _Call(fn, about, key)
        with self._lock:
            if self._stuck >= self._max_stuck or (key is not None and key in self._stuck_keys):
                return CallOutcome(False, 0, refused=True)
            inbox = self._idle.pop() if self._idle else self._new_helper()
        inbox.put(work)
        _wait(work.done, budget_s, cancel)
        elapsed_ms = round((time.perf_counter() - work.began) * 1000)
        with self._lock:
            if work.done.is_set():
                return CallOutcome(True, elapsed_ms, work.error)
            work.abandoned = True
            self._stuck += 1
            if key is not None:
                self._stuck_keys[key] = self._stuck_keys.get(key, 0) + 1
        return CallOutcome(False, elapsed_ms)

    def close(self) -> None:
        """Let the idle helpers exit; a stuck one exits when its call returns."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for inbox in idle:
            inbox.put(None)

    def _new_helper(self) -> queue.SimpleQueue[_Call | None]:
        inbox: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._started += 1
        name = f"{self._name}-{self._started}"
        threading.Thread(target=self._serve, args=(inbox,), name=name, daemon=True).start()
        return inbox

    def _serve(self, inbox: queue.SimpleQueue[_Call | None]) -> None:
        while (work := inbox.get()) is not None:
            try:
                work.fn()
            except BaseException as error:  # the host's code: even SystemExit is only reported
                work.error = error
            with self._lock:
                if work.abandoned:
                    self._stuck -= 1
                    if work.key is not None:
                        left = self._stuck_keys.pop(work.key) - 1
                        if left:
                            self._stuck_keys[work.key] = left
                keep = not self._closed and len(self._idle) < MAX_IDLE
                if keep:
                    self._idle.append(inbox)
                # Under the lock: the caller sees either done or abandoned, never both.
                work.done.set()
            if work.abandoned:
                log.info(
                    "a hook abandoned past its budget returned; ignored",
                    elapsed_ms=round((time.perf_counter() - work.began) * 1000),
                    **work.about,
                )
            if not keep:
                return


def _wait(done: threading.Event, timeout_s: float, cancel: threading.Event | None) -> None:
    """Wait for `done` up to `timeout_s`, looking at `cancel` every CANCEL_POLL_S."""
    if cancel is None:
        done.wait(timeout_s)
        return
    give_up = time.monotonic() + timeout_s
    while not cancel.is_set() and (left := give_up - time.monotonic()) > 0:
        if done.wait(min(left, CANCEL_POLL_S)):
            return


class HookQueue(Generic[T]):
    """One daemon worker thread running queued work in order, never blocking the caller."""

    def __init__(self, run: Callable[[T], None], capacity: int, name: str) -> None:
        self._run = run
        self._queue: queue.Queue[T | None] = queue.Queue(capacity)
        self._name = name
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._unfinished = 0
        self._dropped = 0
        self._thread: threading.Thread | None = None
        self._stopped = False

    def submit(self, item: T) -> bool:
        """Queue `item`; False (and a count, logged) if the queue is full or stopped."""
        with self._lock:
            if self._stopped:
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()
            try:
                self._queue.put_nowait(item)
            except queue.Full:
                self._dropped += 1
                if self._dropped == 1 or self._dropped % 100 == 0:
                    log.warning(
                        "after-enqueue hooks are behind; calls dropped", dropped=self._dropped
                    )
                return False
            self._unfinished += 1
            return True

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until everything queued so far has run; False at the timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._unfinished == 0, timeout_s)

    def stop(self) -> None:
        """Stop after the item running now (not waited for); what is queued is dropped."""
        with self._lock:
            self._stopped = True
            left = self._queue.qsize()
            dropped = self._dropped
        with contextlib.suppress(queue.Full):  # full: the worker is busy, and checks on its own
            self._queue.put_nowait(None)  # wakes an idle worker
        if left or dropped:
            log.warning(
                "after-enqueue hooks not run", left_at_stop=left, dropped_while_behind=dropped
            )

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            with self._lock:
                if self._stopped or item is None:
                    self._unfinished = 0
                    self._idle.notify_all()
                    return
            try:
                self._run(item)
            except Exception:  # _run reports the host's errors itself; this is a bug
                log.exception("after-enqueue hook runner failed")
            with self._lock:
                self._unfinished -= 1
                self._idle.notify_all()
