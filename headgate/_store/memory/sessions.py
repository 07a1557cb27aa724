"""Ended login sessions in memory (operational state, as the SQL store's table)."""

from __future__ import annotations

from collections.abc import Callable

from headgate._clock import Clock
from headgate._errors import StoreClosed
from headgate._store.memory.state import MemoryState
from headgate._store.port import SessionRevocations, is_session_id


class MemorySessionRevocations(SessionRevocations):
    def __init__(self, state: MemoryState, clock: Clock, is_closed: Callable[[], bool]) -> None:
        self._state = state
        self._clock = clock
        self._is_closed = is_closed

    def revoke(self, session_id: str, expires_at_ms: int) -> None:
        if not is_session_id(session_id):
            raise ValueError(f"session_id: not a session id: {session_id[:80]!r}")
        with self._state.writing():
            if self._is_closed():
                raise StoreClosed("recording a logout: the store is closed")
            now = self._clock.now_ms()
            with self._state.reading():
                revoked = self._state.revoked_sessions
                for expired in [key for key, until in revoked.items() if until <= now]:
                    del revoked[expired]
                revoked.setdefault(session_id, expires_at_ms)

    def is_revoked(self, session_id: str) -> bool:
        if not is_session_id(session_id):
            return False
        now = self._clock.now_ms()
        with self._state.reading():
            return self._state.revoked_sessions.get(session_id, now) > now
