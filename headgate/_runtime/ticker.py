"""Wakes the scheduler at an instant of the injected clock, not on a fixed beat."""

from __future__ import annotations

import threading
from collections.abc import Callable

from headgate._clock import Clock


class Ticker:
    """A thread that calls `on_due` once the clock reaches the latest deadline set."""

    def __init__(self, clock: Clock, on_due: Callable[[], None], name: str = "headgate-ticker"):
        self._clock = clock
        self._on_due = on_due
        self._lock = threading.Lock()
        self._changed = threading.Event()
        self._deadline: int | None = None
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake_at(self, deadline_ms: int) -> None:
        with self._lock:
            self._deadline = deadline_ms
            self._changed.set()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._changed.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopped:
                    return
                deadline = self._deadline
                self._changed.clear()
            if deadline is None:
                self._changed.wait()
                continue
            self._clock.sleep_until(deadline, self._changed)
            with self._lock:
                if self._stopped:
                    return
                if self._changed.is_set() or self._clock.now_ms() < deadline:
                    continue
                self._deadline = None
            self._on_due()
