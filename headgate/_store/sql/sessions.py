"""Ended login sessions on SQL: `headgate_revoked_sessions` (operational state)."""

from __future__ import annotations

from sqlalchemy import delete, exists, insert, select

from headgate._store.port import SessionRevocations, is_session_id
from headgate._store.sql.database import Database
from headgate._store.sql.schema import revoked_sessions

_sessions = revoked_sessions


class SqlSessionRevocations(SessionRevocations):
    def __init__(self, database: Database) -> None:
        self._database = database
        self._clock = database.clock

    def revoke(self, session_id: str, expires_at_ms: int) -> None:
        if not is_session_id(session_id):
            raise ValueError(f"session_id: not a session id: {session_id[:80]!r}")
        with self._database.serialised_write("recording a logout") as connection:
            self._database.synchronise_clock(connection)
            now = self._clock.now_ms()
            connection.execute(delete(_sessions).where(_sessions.c.expires_at_ms <= now))
            known = select(_sessions.c.session_id).where(_sessions.c.session_id == session_id)
            if connection.execute(known).first() is None:
                connection.execute(
                    insert(_sessions).values(session_id=session_id, expires_at_ms=expires_at_ms)
                )

    def is_revoked(self, session_id: str) -> bool:
        if not is_session_id(session_id):
            return False
        now = self._clock.now_ms()
        query = select(
            exists().where(_sessions.c.session_id == session_id, _sessions.c.expires_at_ms > now)
        )
        with self._database.reading("reading a session's logout") as connection:
            return bool(connection.execute(query).scalar_one())
