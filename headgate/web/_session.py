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

Logging out ends the session in the store (`operator_of(hg).revoke_session`, by its
nonce, never its value), so every process on it refuses the cookie from then
on, restarted ones too; each request a cookie would authorise asks the store.
A store that cannot answer that question authorises no cookie (logged): the
request is treated as one without a session until it can.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Final, Protocol

from headgate._clock import Clock
from headgate._errors import StoreError
from headgate._logs import get_logger

COOKIE: Final = "headgate_session"
LEGACY_COOKIE: Final = "headgate_token"
"""The cookie of earlier versions, which held the token itself: cleared at login and logout."""
LIFETIME_MS: Final = 12 * 60 * 60 * 1000
"""A working day: long enough not to interrupt an operator, short enough that a
value left in a browser stops working by the next one."""
CSRF_HEADER: Final = "x-csrf-token"
_VERSION: Final = "v2"
log = get_logger("headgate.web")


@dataclass(frozen=True)
class Session:
    value: str
    expires_at_ms: int
    csrf_token: str
    session_id: str
    """Its nonce: what a logout records (the value itself stays in the cookie)."""


class Revocations(Protocol):
    """Where ended sessions are kept for every process: the Headgate's store."""

    def revoke_session(self, session_id: str, expires_at_ms: int) -> None: ...

    def session_revoked(self, session_id: str) -> bool: ...


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
        *,
        revocations: Revocations,
    ) -> None:
        secret = secret if secret is not None else secrets.token_bytes(32)
        self._key = hmac.new(
            secret,
            b"headgate console session\x00" + token.encode("utf-8", "surrogatepass"),
            "sha256",
        ).digest()
        self._clock = clock
        self.lifetime_ms = lifetime_ms
        self._revocations = revocations

    def issue(self, origin: str) -> Session:
        """A new session, valid on `origin` alone (`scheme://host[:port]`)."""
        expires = self._clock.now_ms() + self.lifetime_ms
        nonce = secrets.token_urlsafe(16)
        body = f"{_VERSION}.{expires}.{nonce}"
        value = f"{body}.{self._sign('session', _bound(body, origin))}"
        return self._session(value, expires, nonce)

    def verify(self, value: str | None, origin: str | None) -> Session | None:
        """The session `value` names, if it is one of ours, issued on `origin`
        (the request's own; None: it has none), unexpired and not ended by a
        logout (the store is asked, once the rest holds).

        Anything else is no session, never an error: the value is whatever the
        browser sent, which a page on a sibling domain can set (cookie tossing),
        so a byte no issued value holds (they are all ASCII) must not break a
        route that would answer without it."""
        if not value or not origin or not value.isascii():
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
        if expires <= self._clock.now_ms() or self._revoked(nonce):
            return None
        return self._session(value, expires, nonce)

    def csrf_matches(self, session: Session, offered: str | None) -> bool:
        return offered is not None and hmac.compare_digest(
            session.csrf_token.encode(), offered.encode("utf-8", "surrogatepass")
        )

    def revoke(self, session: Session) -> None:
        """End `session` in every process on the store, from now until it would
        have expired anyway. A store error is raised: the logout did not hold."""
        self._revocations.revoke_session(session.session_id, session.expires_at_ms)

    def _revoked(self, session_id: str) -> bool:
        try:
            return self._revocations.session_revoked(session_id)
        except StoreError as error:
            log.warning(
                "a console session could not be checked against the store's logouts; "
                "treated as none",
                error=type(error).__name__,
            )
            return True

    def _session(self, value: str, expires: int, session_id: str) -> Session:
        return Session(value, expires, self._sign("csrf", value), session_id)

    def _sign(self, purpose: str, text: str) -> str:
        message = f"{purpose}\x00{text}".encode("utf-8", "surrogatepass")
        return _b64(hmac.new(self._key, message, hashlib.sha256).digest())
