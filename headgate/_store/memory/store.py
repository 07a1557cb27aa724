"""The memory store: the whole port in one process's memory, for tests."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

from headgate._clock import Clock
from headgate._errors import StoreClosed
from headgate._store.memory import compaction
from headgate._store.memory.activity import MemoryActivityLog
from headgate._store.memory.handlers import MemoryHandlerDeclarations
from headgate._store.memory.leases import MemoryLeases
from headgate._store.memory.log import MemoryEventLog
from headgate._store.memory.notifications import MemoryListener
from headgate._store.memory.reads import MemoryReads
from headgate._store.memory.sessions import MemorySessionRevocations
from headgate._store.memory.state import MemoryState
from headgate._store.memory.workers import MemoryWorkers
from headgate._store.port import (
    SCHEMA_REVISION,
    CompactionPolicy,
    CompactionReport,
    Fence,
    Listener,
    Store,
)
from headgate._store.port.compaction import run_compaction

CLOSE_WAIT_S: Final = 5.0
"""How long close() waits for a write in flight."""


class MemoryStore(Store):
    """Everything a store keeps, in this process's memory: `Headgate("memory://")`.

    It keeps the port's every promise (the contract suite in
    `tests/store/contract/` runs on it as on SQLite and PostgreSQL), so a
    host's tests, and Headgate's own, run the real runtime on it without a
    database, and quickly. What it is not:

    * shared: it lives in the process that made it, and no other process can
      open it (a forked child gets a copy of its own, from then on apart);
    * durable: nothing survives the process;
    * a database: it has no schema and no migrations, so the operator
      commands (`headgate ... --db`) and `headgate.ops` refuse `memory://`.

    Handles made with the same `state` share one store (the contract suite's
    `make_store` opens several, as processes open one database); each has its
    own clock and closes on its own.
    """

    log: MemoryEventLog
    leases: MemoryLeases
    workers: MemoryWorkers
    reads: MemoryReads
    activity: MemoryActivityLog
    sessions: MemorySessionRevocations
    handlers: MemoryHandlerDeclarations

    def __init__(self, clock: Clock, state: MemoryState | None = None) -> None:
        self.clock = clock
        self.state = state if state is not None else MemoryState()
        self._closed = False
        self._listeners: list[MemoryListener] = []
        self._listeners_lock = threading.Lock()
        self.log = MemoryEventLog(self.state, clock, self._is_closed)
        self.leases = MemoryLeases(self.state, clock, self._is_closed)
        self.workers = MemoryWorkers(self.state, clock, self._is_closed)
        self.reads = MemoryReads(self.state)
        self.activity = MemoryActivityLog(self.state)
        self.sessions = MemorySessionRevocations(self.state, clock, self._is_closed)
        self.handlers = MemoryHandlerDeclarations(self.state, clock, self._is_closed)

    def __repr__(self) -> str:
        return "MemoryStore('memory://')"

    def _is_closed(self) -> bool:
        return self._closed

    def schema_revision(self) -> int:
        """This build's: a memory store holds what this build writes, nothing older."""
        if self._closed:
            raise StoreClosed("reading the schema version: the store is closed")
        return SCHEMA_REVISION

    def listen(self, on_enqueued: Callable[[str | None], None]) -> Listener | None:
        """Every commit's `notify_enqueued` queues, heard on a thread of the
        listener's own (this handle's writes included, as PostgreSQL's NOTIFY
        reaches its own sessions)."""
        listener = self.state.notifications.listen(on_enqueued)
        with self._listeners_lock:
            self._listeners.append(listener)
        return listener

    def compact(
        self,
        policy: CompactionPolicy | None = None,
        cancel: threading.Event | None = None,
        *,
        fence: Fence | None = None,
    ) -> CompactionReport:
        steps = compaction.MemoryCompactionSteps(self.state, self.log)
        return run_compaction(steps, policy, cancel, fence)

    def close(self) -> None:
        """Refuse further writes; a write in flight finishes first. Listeners made
        here stop."""
        self._closed = True
        self.state.wait_for_writer(CLOSE_WAIT_S)
        with self._listeners_lock:
            listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener.close()
