"""SIGTERM and Ctrl-C for the long-running commands (`serve`, `worker`).

The first asks for a clean stop: running jobs get the shutdown timeout to
finish, then what is left is given back. The terminal is told so, and that a
second Ctrl-C (or SIGTERM) gives the running jobs back at once, unfinished,
for another worker to run: a person pressing Ctrl-C twice wants the process
gone, and waiting 30 s in silence looks like a hang.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

from headgate._app import Headgate
from headgate._operator import operator_of


class StopSignals:
    """Heard on the main thread; `asked` is set by the first signal."""

    def __init__(self, hg: Headgate, grace_s: float | None) -> None:
        """`grace_s`: how long running jobs may finish (None: this process runs none)."""
        self.asked = threading.Event()
        self._hg = hg
        self._grace_s = grace_s

    def install(self) -> None:
        for handled in (signal.SIGTERM, signal.SIGINT):
            signal.signal(handled, self._heard)

    def _heard(self, signum: int, frame: FrameType | None) -> None:
        if not self.asked.is_set():
            self.asked.set()
            if self._grace_s is None:
                _say("headgate: stopping")
                return
            _say(
                f"headgate: stopping; running jobs have up to {self._grace_s:g} s to finish "
                "(press Ctrl-C again to give them back now)"
            )
            return
        _say("headgate: giving running jobs back now, unfinished")
        operator_of(self._hg).give_back_running_jobs_now()


def _say(line: str) -> None:
    """One whole line in one write: a signal handler may interrupt a print in
    progress, whose stream it must not write through."""
    os.write(2, f"{line}\n".encode())
