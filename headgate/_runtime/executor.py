"""Threads that run sync handlers, and one event loop that runs async ones.

A thread stuck in a handler past its timeout cannot be killed; the pool then
grows a thread to keep the worker's capacity (up to a bound), and the stuck
one is counted and reported until it returns.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from headgate._logs import get_logger

log = get_logger("headgate.workers")


class ThreadRunner:
    """A fixed set of daemon threads, growable, taking work from one queue."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def ensure(self, count: int) -> None:
        """At least `count` threads."""
        with self._lock:
            while len(self._threads) < count:
                thread = threading.Thread(
                    target=self._serve, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def submit(self, work: Callable[[], None]) -> None:
        self._work.put(work)

    def close(self) -> None:
        """Let idle threads end; busy ones end after their current work."""
        with self._lock:
            for _ in self._threads:
                self._work.put(None)
            self._threads.clear()

    def _serve(self) -> None:
        while True:
            work = self._work.get()
            if work is None:
                return
            try:
                work()
            except Exception:  # a fault in the work's own handling: this thread serves on
                log.exception("a handler thread's work raised", thread=self._name)


class LoopRunner:
    """One asyncio event loop on a daemon thread, started on first use."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def submit(self, coroutine: Coroutine[Any, Any, None]) -> Future[None]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._running_loop())

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                threading.Thread(target=run, name=self._name, daemon=True).start()
                ready.wait()
                self._loop = loop
            return self._loop
