"""The console's login session: a signed cookie value with an expiry, never the token.

A value is `v2.<expires_at_ms>.<nonce>.<signature>`, the signature an HMAC-SHA256
of the rest and of the origin it was issued on (scheme, host and port, as the
client reached the app: `_guard.own_origin`) under a key derived from the API
token and a secret: the token itself never leaves the server, a value forged or
altered is refused, one whose expiry has passed is refused, and one presented
on any other origin is no session there. Changing the token changes the key,
which ends every session made under the old one.

Why the origin: a browser sends a cookie to every port of the host name it was
set for (cookies ignore ports), so a console on `127.0.0.1:8080` hands its
session to whatever else listens on `127.0.0.1`; another console there (a second
Headgate, sharing the secret) refuses it. A program that has the value can
still present it to this origin by name, which no cookie setting prevents: the
console wants a host name of its own (docs/how-to/security.md).

The secret is random per app unless the host gives one (`session_secret=`, or
$HEADGATE_SESSION_SECRET): with the random one, a restart ends the sessions,
and a stolen value cannot be tried offline against guesses of the token (the
key mixes in a secret the thief does not have). Processes behind one address
(replicas behind a load balancer) must share a secret, or each refuses the
sessions the others made.

A session's CSRF token is an HMAC of its value under the same key: the console
page carries it (a <meta> tag) and console.js sends it back as X-CSRF-Token with
every write, which a page on another origin can neither read nor compute.
Logging out revokes the value in this process (bounded: see `Sessions.revoke`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from headgate._clock import Clock

COOKIE: Final = "headgate_session"
LEGACY_COOKIE: Final = "headgate_token"
"""The cookie of earlier versions, which held the token itself: cleared at login and logout."""
LIFETIME_MS: Final = 12 * 60 * 60 * 1000
"""A working day: long enough not to interrupt an operator, short enough that a
value left in a browser stops working by the next one."""
CSRF_HEADER: Final = "x-csrf-token"
MAX_REVOKED: Final = 10_000
_VERSION: Final = "v2"


@dataclass(frozen=True)
class Session:
    value: str
    expires_at_ms: int
    csrf_token: str


def token_bytes(token: str) -> bytes:
    """`token` as the bytes a client sends: UTF-8, and for a token read from the
    environment that is not valid UTF-8, its original bytes."""
    try:
        return token.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return token.encode("utf-8", "surrogatepass")


def _bound(body: str, origin: str) -> str:
    """What a session's signature covers: its body and the origin it was issued on."""
    return f"{body}\x00{origin}"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


class Sessions:
    """Issues and checks session values for one API token."""

    def __init__(
        self,
        token: str,
        clock: Clock,
        secret: bytes | None = None,
        lifetime_ms: int = LIFETIME_MS,
    ) -> None:
        secret = secret if secret is not None else secrets.token_bytes(32)
        self._key = hmac.new(
            secret,
            b"headgate console session\x00" + token.encode("utf-8", "surrogatepass"),
            "sha256",
        ).digest()
        self._clock = clock
        self.lifetime_ms = lifetime_ms
        self._revoked: OrderedDict[str, int] = OrderedDict()

    def issue(self, origin: str) -> Session:
        """A new session, valid on `origin` alone (`scheme://host[:port]`)."""
        expires = self._clock.now_ms() + self.lifetime_ms
        body = f"{_VERSION}.{expires}.{secrets.token_urlsafe(16)}"
        return self._session(f"{body}.{self._sign('session', _bound(body, origin))}", expires)

    def verify(self, value: str | None, origin: str | None) -> Session | None:
        """The session `value` names, if it is one of ours, issued on `origin`
        (the request's own; None: it has none), unexpired and not revoked.

        Anything else is no session, never an error: the value is whatever the
        browser sent, which a page on a sibling domain can set (cookie tossing),
        so a byte no issued value holds (they are all ASCII) must not break a
        route that would answer without it."""
        if not value or not origin or not value.isascii() or value in self._revoked:
            return None
        body, _, signature = value.rpartition(".")
        version, _, rest = body.partition(".")
        expires_text, _, nonce = rest.partition(".")
        if version != _VERSION or not nonce or not expires_text.isdigit():
            return None
        expected = self._sign("session", _bound(body, origin))
        if not hmac.compare_digest(signature.encode(), expected.encode()):
            return None
        expires = int(expires_text)
        if expires <= self._clock.now_ms():
            return None
        return self._session(value, expires)

    def csrf_matches(self, session: Session, offered: str | None) -> bool:
        return offered is not None and hmac.compare_digest(
            session.csrf_token.encode(), offered.encode("utf-8", "surrogatepass")
        )

    def revoke(self, session: Session) -> None:
        """Refuse `session` from now on, in this process. Expired entries are
        dropped first; past MAX_REVOKED (only a holder of the token can log in,
        so only they can fill it) the oldest entry goes."""
        now = self._clock.now_ms()
        for value, expires in list(self._revoked.items()):
            if expires <= now:
                del self._revoked[value]
        self._revoked[session.value] = session.expires_at_ms
        while len(self._revoked) > MAX_REVOKED:
            self._revoked.popitem(last=False)

    def _session(self, value: str, expires: int) -> Session:
        return Session(value, expires, self._sign("csrf", value))

    def _sign(self, purpose: str, text: str) -> str:
        message = f"{purpose}\x00{text}".encode("utf-8", "surrogatepass")
        return _b64(hmac.new(self._key, message, hashlib.sha256).digest())
