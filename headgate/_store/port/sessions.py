"""Ended login sessions: the console's logouts, kept where every process sees them.

A console session is a signed cookie value (`headgate.web._session`), checked
by whichever process a request reaches; its end must hold in all of them, and
across restarts. The store keeps each ended session's id until the session
would have expired anyway: a small operational table (no events), bounded by
the logouts of one session lifetime, its expired rows dropped at each logout.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Final

MAX_SESSION_ID_LENGTH: Final = 64
_SESSION_ID: Final = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_SESSION_ID_LENGTH}}}")


def is_session_id(text: str) -> bool:
    """Whether `text` can be a session's id: 1 to 64 of base64url's characters
    (what `secrets.token_urlsafe` makes), so any store holds it as it is."""
    return _SESSION_ID.fullmatch(text) is not None


class SessionRevocations(ABC):
    @abstractmethod
    def revoke(self, session_id: str, expires_at_ms: int) -> None:
        """Record that the session `session_id` (`is_session_id`; else ValueError)
        has ended, until `expires_at_ms`, when it would have
        expired anyway; committed when this returns, so every process that asks
        `is_revoked` from then on is told. Repeating it changes nothing. The
        ended sessions whose expiry has passed (store time) are forgotten in
        the same write."""

    @abstractmethod
    def is_revoked(self, session_id: str) -> bool:
        """Whether `session_id` was revoked and has not expired since (store
        time), read from committed state now. An id no session can have
        (`is_session_id`) was never revoked."""
