"""Helpers for testing code that uses Headgate: a clock that moves only when told,
eager mode for a block of code, and the seams a test drives by hand (a job
finished outside Headgate, the activity roll-up now).

Its namespace is its public surface (`__all__`): what it imports is bound under
a private name, so `from headgate.testing import *` and `dir()` show only those.
"""

import contextlib as _contextlib
import threading as _threading
from collections.abc import Iterator as _Iterator
from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from headgate._app import Headgate as _Headgate
    from headgate._model import Job as _Job

__all__ = ["FakeClock", "eager", "finish_job", "roll_up_activity"]


@_contextlib.contextmanager
def eager(hg: "_Headgate") -> _Iterator["_Headgate"]:
    """Within the block, each job `hg` enqueues runs at once in the caller, before
    enqueue returns (`Headgate(..., eager=True)` for a block): its attempts,
    retries (at once) and result recorded as a worker records them, so a test
    of code that enqueues needs no worker and no `drain()`. Not for a Headgate
    whose workers run meanwhile: they would race for the same jobs."""
    before = hg.eager
    hg.eager = True
    try:
        yield hg
    finally:
        hg.eager = before


def finish_job(hg: "_Headgate", job_id: str, state: str = "completed") -> "_Job":
    """Mark a pending job finished, as a host that consumes jobs outside Headgate
    would (`state`: how it finished); a ValidationError for a job finished already."""
    return hg._core.finish_job(job_id, state)


def roll_up_activity(hg: "_Headgate") -> list[int]:
    """Roll up the minutes closed since the last roll-up now (the lease holder does
    it once a minute anyway): the minutes rolled up, oldest first."""
    return hg._core.roll_up_activity()


class FakeClock:
    """A clock that only moves when told to; sleepers wake as it passes them.

    `sleep_until` polls its interrupt in short real-time slices, so a test that
    sets the interrupt or advances the clock releases sleepers at once.
    """

    def __init__(self, start_ms: int = 1_704_067_200_000) -> None:
        self._now = start_ms
        self._moved = _threading.Condition()

    def now_ms(self) -> int:
        with self._moved:
            return self._now

    def set(self, now_ms: int) -> None:
        with self._moved:
            if now_ms < self._now:
                raise ValueError(f"a fake clock never goes back ({now_ms} < {self._now})")
            self._now = now_ms
            self._moved.notify_all()

    def advance(self, delta_ms: int) -> int:
        with self._moved:
            self.set(self._now + delta_ms)
            return self._now

    def sleep_until(self, deadline_ms: int, interrupt: _threading.Event) -> None:
        with self._moved:
            while self._now < deadline_ms and not interrupt.is_set():
                self._moved.wait(0.005)
