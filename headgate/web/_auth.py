"""Optional token auth: with HEADGATE_API_TOKEN set, every request needs the token,
as a bearer header (API clients) or the session cookie the console's login sets
(`_session`); all but the login and logout routes, the probes and the static files.

A request with an `Authorization: Bearer` header is judged by it alone: a wrong
one is refused even with a valid cookie. Any other request (one with a proxy's
Basic credentials too) is judged by its cookie, and those are the writes the
write guard asks a CSRF token of: both ask `_guard.bearer_credentials` which
requests are a bearer client's. A wrong bearer token
counts towards the client's login throttle (`_throttle`) and is logged with the
client's address (and the trusted proxy's it came through, `_forwarded`), never
with what was offered.
"""

from __future__ import annotations

import hmac
from typing import Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from headgate.web._errors import ASGIApp, Receive, Scope, Send, log
from headgate.web._forwarded import forwarded_by
from headgate.web._guard import bearer_credentials, cookie_session
from headgate.web._probes import HEALTH_PATHS
from headgate.web._session import Sessions, token_bytes
from headgate.web._templates import SESSION_STATE, page
from headgate.web._throttle import FailureThrottle, client_key

OPEN_PATHS: Final = frozenset({"/login", "/logout", *HEALTH_PATHS})
"""Paths answered without the token: logging in and out, and the probes (a load
balancer's or Kubernetes' carries none)."""
_OPEN_PREFIXES: Final = ("/static/",)
_API_PREFIXES: Final = ("/api/", "/openapi.json", "/docs", "/metrics")


def token_matches(expected: str, offered: str | bytes | None) -> bool:
    """Constant-time comparison of the bytes; a string that no valid token can
    equal (a lone surrogate, legal in JSON) simply does not match."""
    if offered is None:
        return False
    if isinstance(offered, str):
        offered = offered.encode("utf-8", "surrogatepass")
    return hmac.compare_digest(token_bytes(expected), offered)


def client_address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def too_many_attempts(retry_after_s: int) -> JSONResponse:
    return JSONResponse(
        {"error": f"authorization: too many wrong tokens; retry in {retry_after_s} s"},
        status_code=429,
        headers={"Retry-After": str(retry_after_s)},
    )


def record_failure(throttle: FailureThrottle, scope: Scope, event: str) -> None:
    address = client_address(scope)
    fields: dict[str, object] = {"client": address}
    proxy = forwarded_by(scope)
    if proxy is not None:
        fields["via"] = proxy
    throttled = throttle.failed(client_key(address))
    if throttled == "client":
        log.warning(f"{event}; client throttled", failures=throttle.limit, **fields)
    elif throttled == "all":
        log.warning(f"{event}; every client throttled", failures=throttle.total_limit, **fields)
    else:
        log.warning(event, **fields)


def _is_open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(_OPEN_PREFIXES)


class TokenAuth:
    def __init__(
        self, app: ASGIApp, token: str, sessions: Sessions, throttle: FailureThrottle
    ) -> None:
        self.app = app
        self.token = token
        self.sessions = sessions
        self.throttle = throttle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Mounted inside a host's app, the path still carries the mount's prefix
        # (the root path): the open paths are the app's own.
        base: str = scope.get("root_path", "")
        path: str = scope["path"].removeprefix(base) if base else scope["path"]
        bearer = bearer_credentials(scope)
        refusal: Response | None = None
        if _is_open(path) or bearer is None:
            session = None if bearer is not None else cookie_session(scope, self.sessions)
            if session is not None:
                scope.setdefault("state", {})[SESSION_STATE] = session
            if session is None and not _is_open(path):
                refusal = self._unauthorised(scope, path)
        else:
            refusal = self._bearer_refusal(scope, bearer, path)
        await (refusal or self.app)(scope, receive, send)

    def _bearer_refusal(self, scope: Scope, bearer: bytes, path: str) -> Response | None:
        """None for the right token; 429 for a throttled client, else 401."""
        client = client_key(client_address(scope))
        retry_after = self.throttle.retry_after_s(client)
        if retry_after is not None:
            return too_many_attempts(retry_after)
        if token_matches(self.token, bearer):
            self.throttle.succeeded(client)
            return None
        record_failure(self.throttle, scope, "bearer token refused")
        return self._unauthorised(scope, path)

    def _unauthorised(self, scope: Scope, path: str) -> Response:
        if path.startswith(_API_PREFIXES):
            return JSONResponse(
                {"error": "authorization: a valid bearer token is required"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        return page(Request(scope), "login.html", 401, token_configured=True)
