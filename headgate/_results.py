"""Waiting for a job's end: what `JobHandle.wait` and `await_result` stand on.

A waiter reads its job's row, and reads it again each time the store says
jobs may have ended: a write that ended a task's jobs for good (a handler's
jobs have no handle to wait on, so their ends are not announced) tells every
listening process (`JOBS_ENDED`, by PostgreSQL's NOTIFY; SQLite's listener hears every
commit; the memory store, its own), through one listener per Headgate,
started at the first wait. A notification lost while the listener
reconnects, or an end no write announces (an operator's cancel of a pending
job), is found by a read every `RECHECK_S` at the latest.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Final

from headgate._domain.lifecycle import UNFINISHED_STATES
from headgate._errors import NotFound, ValidationError
from headgate._projections import JobRow
from headgate._store.port import JOBS_ENDED, JOBS_TAKEN, Listener, Store

ReadAsync = Callable[[Callable[[], JobRow]], Awaitable[JobRow]]
"""Runs a read off the event loop (the Headgate's `AsyncPool.run`)."""

RECHECK_S: Final = 1.0
"""The longest a waiter goes without reading its job (a notification may be lost)."""


class ResultWatch:
    """The waiters of one Headgate, woken together by the store's notifications."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._generation = 0
        """Moves at each notification: a waiter that read before it reads again."""
        self._listener: Listener | None = None
        self._listening = False
        self._loops: set[Callable[[], None]] = set()
        """The wake-ups of async waiters, called at each notification."""

    def wait_for_end(self, job_id: str, timeout_s: float | None) -> JobRow:
        """The job's row once it has ended (any state but pending and running);
        TimeoutError if it has not within `timeout_s` (None: wait as long as it
        takes); NotFound for a job the store does not hold."""
        _require_seconds(timeout_s)
        self._listen()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            with self._lock:
                seen = self._generation
            row = self._read(job_id)
            if row.state not in UNFINISHED_STATES:
                return row
            left = RECHECK_S if deadline is None else min(deadline - time.monotonic(), RECHECK_S)
            if deadline is not None and deadline - time.monotonic() <= 0:
                raise TimeoutError(f"job {job_id} is still {row.state} after {timeout_s} s")
            with self._changed:
                if self._generation == seen:
                    self._changed.wait(max(left, 0))

    async def await_end(self, job_id: str, timeout_s: float | None, read: ReadAsync) -> JobRow:
        """`wait_for_end` for a coroutine: woken on its own loop, each read on `read`
        (the Headgate's thread pool), so the loop never blocks on the store."""
        _require_seconds(timeout_s)
        self._listen()
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def wake() -> None:
            loop.call_soon_threadsafe(woken.set)

        with self._lock:
            self._loops.add(wake)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while True:
                woken.clear()
                row = await read(lambda: self._read(job_id))
                if row.state not in UNFINISHED_STATES:
                    return row
                left = RECHECK_S
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError(f"job {job_id} is still {row.state} after {timeout_s} s")
                    left = min(left, remaining)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), left)
        finally:
            with self._lock:
                self._loops.discard(wake)

    def close(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            self._listening = False
        if listener is not None:
            listener.close()

    def _read(self, job_id: str) -> JobRow:
        row = self._store.reads.job(job_id)
        if row is None:
            raise NotFound(f"no job {job_id!r}")
        return row

    def _listen(self) -> None:
        with self._lock:
            if self._listening:
                return
            self._listening = True
        listener = self._store.listen(self._heard)
        with self._lock:
            self._listener = listener

    def _heard(self, queue: str | None) -> None:
        if queue is not None and queue not in (JOBS_ENDED, JOBS_TAKEN):
            return  # an enqueue: no job ended
        with self._changed:
            self._generation += 1
            self._changed.notify_all()
            wakes = list(self._loops)
        for wake in wakes:
            wake()


def _require_seconds(timeout_s: object) -> None:
    """None (or infinity: as long as it takes), or a number of seconds from 0 (a NaN
    would wait for ever, having no deadline it passes)."""
    if timeout_s is None:
        return
    if (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, int | float)
        or math.isnan(timeout_s)
        or timeout_s < 0
    ):
        raise ValidationError(
            "timeout", f"must be None or a number of seconds from 0, got {timeout_s!r}"
        )
