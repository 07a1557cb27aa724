"""Worker heartbeats in memory: one record per worker process start, renewed under
the write lock like any write (so a rescue sees every beat made before it)."""

from __future__ import annotations

from collections.abc import Callable

from headgate._clock import Clock, StoreClock
from headgate._errors import StoreClosed
from headgate._store.memory.state import MemoryState
from headgate._store.port import WorkerBeat, WorkerRow, Workers


class MemoryWorkers(Workers):
    def __init__(self, state: MemoryState, clock: Clock, is_closed: Callable[[], bool]) -> None:
        self._state = state
        self._clock = clock
        self._is_closed = is_closed

    def beat(self, beat: WorkerBeat, ttl_ms: int) -> WorkerRow:
        with self._state.writing():
            self._refuse_if_closed("renewing a worker's heartbeat")
            if isinstance(self._clock, StoreClock):
                self._clock.measure()
            now = self._clock.now_ms()
            row = WorkerRow.beaten(beat, now, ttl_ms)
            with self._state.reading():
                self._state.workers[beat.worker_id] = row
        return row

    def stop(self, worker_id: str) -> None:
        with self._state.writing():
            self._refuse_if_closed("removing a worker's heartbeat")
            with self._state.reading():
                self._state.workers.pop(worker_id, None)

    def live(self, now_ms: int) -> list[WorkerRow]:
        with self._state.reading():
            rows = [row for row in self._state.workers.values() if row.expires_at_ms > now_ms]
        return sorted(rows, key=_oldest_first)

    def in_namespaces(self, boot_id: str, namespaces: str) -> list[WorkerRow]:
        with self._state.reading():
            rows = [
                row
                for row in self._state.workers.values()
                if row.process is not None
                and row.process.boot_id == boot_id
                and row.process.namespaces == namespaces
            ]
        return sorted(rows, key=_oldest_first)

    def _refuse_if_closed(self, where: str) -> None:
        if self._is_closed():
            raise StoreClosed(f"{where}: the store is closed (Headgate.close() was called)")


def _oldest_first(row: WorkerRow) -> tuple[int, str]:
    return row.started_at_ms, row.worker_id
