"""Enqueue notifications inside one process: what LISTEN/NOTIFY is to PostgreSQL.

A write that named queues (`notify_enqueued`) publishes them once it has
committed, never before and never if it raised. Each listener hears them on a
thread of its own, so a slow callback delays neither the writer nor the
other listeners.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Collection
from typing import Final

from headgate._store.port import Listener

_CLOSED: Final = None


class Notifications:
    """The listeners of one memory store (every handle on it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[MemoryListener] = []

    def listen(self, on_enqueued: Callable[[str | None], None]) -> MemoryListener:
        listener = MemoryListener(on_enqueued, self._forget)
        with self._lock:
            self._listeners.append(listener)
        return listener

    def publish(self, queues: Collection[str]) -> None:
        if not queues:
            return
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener.hear(sorted(set(queues)))

    def forget_all(self) -> None:
        """In a forked child: the listeners' threads stayed in the parent."""
        self._lock = threading.Lock()
        self._listeners = []

    def _forget(self, listener: MemoryListener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)


class MemoryListener(Listener):
    def __init__(
        self,
        on_enqueued: Callable[[str | None], None],
        on_close: Callable[[MemoryListener], None],
    ) -> None:
        self._on_enqueued = on_enqueued
        self._on_close = on_close
        self._heard: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="headgate-listen", daemon=True)
        self._thread.start()

    def hear(self, queues: Collection[str]) -> None:
        for name in queues:
            self._heard.put(name)

    def close(self) -> None:
        self._on_close(self)
        self._heard.put(_CLOSED)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while (name := self._heard.get()) is not _CLOSED:
            try:
                self._on_enqueued(name)
            except Exception:  # a callback's failure must not end the subscription
                continue
