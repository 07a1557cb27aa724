"""Leases in memory: one record per lease, its term bumped on every takeover
(see `Leases` for the rules), claimed under the write lock like any write."""

from __future__ import annotations

from collections.abc import Callable

from headgate._clock import Clock, StoreClock
from headgate._errors import StoreClosed
from headgate._store.memory.state import MemoryState
from headgate._store.port import Lease, LeaseHolder, Leases


class MemoryLeases(Leases):
    def __init__(self, state: MemoryState, clock: Clock, is_closed: Callable[[], bool]) -> None:
        self._state = state
        self._clock = clock
        self._is_closed = is_closed

    def acquire(
        self, name: str, holder: LeaseHolder, ttl_ms: int, current_term: int | None = None
    ) -> Lease | None:
        with self._state.writing():
            self._refuse_if_closed(f"claiming lease {name!r}")
            if isinstance(self._clock, StoreClock):
                self._clock.measure()
            now = self._clock.now_ms()
            held = self._state.leases.get(name)
            if held is None:
                return self._store(Lease(name, *_who(holder), 1, now, now + ttl_ms))
            live = held.expires_at_ms > now
            if live and held.holder == holder.holder and held.term == current_term:
                return self._store(
                    Lease(name, *_who(holder), held.term, held.acquired_at_ms, now + ttl_ms)
                )
            if not live or held.holder == holder.holder:
                return self._store(Lease(name, *_who(holder), held.term + 1, now, now + ttl_ms))
            return None

    def release(self, name: str, holder: str, term: int) -> None:
        with self._state.writing():
            self._refuse_if_closed(f"releasing lease {name!r}")
            held = self._state.leases.get(name)
            if held is not None and held.holder == holder and held.term == term:
                self._store(
                    Lease(
                        name,
                        held.holder,
                        held.host,
                        held.pid,
                        held.term,
                        held.acquired_at_ms,
                        self._clock.now_ms(),
                    )
                )

    def status(self, name: str) -> Lease | None:
        with self._state.reading():
            return self._state.leases.get(name)

    def _store(self, lease: Lease) -> Lease:
        with self._state.reading():
            self._state.leases[lease.name] = lease
        return lease

    def _refuse_if_closed(self, where: str) -> None:
        if self._is_closed():
            raise StoreClosed(f"{where}: the store is closed (Headgate.close() was called)")


def _who(holder: LeaseHolder) -> tuple[str, str, int]:
    return holder.holder, holder.host, holder.pid
