"""A worker's identity and its heartbeat row.

The heartbeat is renewed by the worker's own dispatcher (every
`heartbeat_every_ms`, a quarter of its TTL), not by the duty keeper: it says
that this worker's turns go on, so a dispatcher stuck in a write stops
renewing it, and a worker that could not renew it for its whole TTL stops
claiming (`fresh`) until it can again, as its jobs may be rescued meanwhile.
Each beat carries the process's identity on its machine (`local_processes`),
for the local rescue, and reads the fleet's concurrency limits back.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable

from headgate._clock import Clock
from headgate._domain.limits import ConcurrencyLimit
from headgate._errors import StoreError
from headgate._logs import get_logger
from headgate._runtime.config import WorkerConfig
from headgate._runtime.local_processes import LocalProcesses
from headgate._store.port import LeaseHolder, Store, WorkerBeat

log = get_logger("headgate.workers")


def worker_identity(prefix: str = "worker") -> LeaseHolder:
    """A worker's identity: one per process start, never a bare hostname."""
    host = socket.gethostname()
    return LeaseHolder(f"{host}:{os.getpid()}:{uuid.uuid4().hex[:8]}", host, os.getpid())


class Heartbeat:
    """The heartbeat row of one worker, and what its last beat read back."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        identity: LeaseHolder,
        config: WorkerConfig,
        processes: LocalProcesses,
        *,
        queues: dict[str, int],
        kinds: Callable[[], tuple[str, ...]],
    ) -> None:
        self._store = store
        self._clock = clock
        self._identity = identity
        self._config = config
        self._processes = processes
        self._queues = queues
        self._kinds = kinds
        self._started_at_ms = 0
        self._last_beat_ms: int | None = None
        self.next_beat_ms = 0
        """When the next beat is due."""
        self.limits: list[ConcurrencyLimit] = []
        """The fleet's concurrency limits, as read at the last beat."""

    def start(self) -> None:
        self._started_at_ms = self._clock.now_ms()

    def beat(self, now_ms: int, *, running: int, overdue: int) -> None:
        """Renew the row (`running`, `overdue`: the attempts running now, and those
        past their deadline whose handler still holds a thread)."""
        beat = WorkerBeat(
            worker_id=self._identity.holder,
            host=self._identity.host,
            pid=self._identity.pid,
            queues=self._queues,
            started_at_ms=self._started_at_ms,
            running=running,
            overdue=overdue,
            process=self._processes.here,
            kinds=self._kinds(),
        )
        try:
            self._store.workers.beat(beat, self._config.heartbeat_ttl_ms)
            self._last_beat_ms = now_ms
            self.limits = [row.limit() for row in self._store.reads.limits_state(now_ms).limits]
        except StoreError:
            log.warning("could not renew the worker heartbeat", worker_id=self._identity.holder)
        self.next_beat_ms = now_ms + self._config.heartbeat_every_ms

    def fresh(self, now_ms: int) -> bool:
        """Whether the last beat that reached the store is within its TTL."""
        return (
            self._last_beat_ms is not None
            and now_ms - self._last_beat_ms < self._config.heartbeat_ttl_ms
        )

    def remove(self) -> None:
        """The row goes (the worker stopped): no rescuer waits for its TTL."""
        try:
            self._store.workers.stop(self._identity.holder)
        except StoreError:
            return
