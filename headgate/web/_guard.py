"""Cross-site write protection: one admission check in front of every route.

A write is any method but GET, HEAD and OPTIONS, on any path (the API, /login,
/logout, whatever is added later). Browsers let any page send some writes to
any address: a <form> posts form-encoded bodies, `fetch(url, {mode: "no-cors"})`
posts text/plain or nothing at all, and either carries the cookies the browser
holds for the target. A write is refused (403, `{"error": "origin: ..."}`,
nothing changed) when:

1. `Sec-Fetch-Site` is present and is not `same-origin` or `none` (typed in or
   bookmarked). `same-site` is refused too: it covers another port of the same
   host, and a cookie's SameSite ignores ports. Browsers send the header only
   to trustworthy addresses (HTTPS, localhost), hence rule 2.
2. `Origin` is present and is not this app's own origin; `Origin: null` (a
   sandboxed frame, a page whose referrer policy hides it) is refused. Browsers
   send Origin with every write, cross-origin or not, so the console's own
   requests carry it and pass.
3. Its Content-Type is one a form or a no-cors fetch can send without asking
   (CORS-safelisted: form-urlencoded, multipart/form-data, text/plain), even with
   an empty body. Writes are JSON, or have no body at all (`curl -X POST`).
4. It would be authorised by the console's login cookie (a valid session and no
   `Authorization: Bearer` header) but lacks that session's CSRF token in
   `X-CSRF-Token`. A bearer-token client needs none: a browser never adds that
   header on its own, and a page on another origin cannot add it without a CORS
   preflight, which this app never grants. Any other Authorization does not
   count: a browser behind a proxy that asks for HTTP Basic credentials sends
   them with every request, a forged one included, and the cookie still
   authorises it (`_auth`), so it needs the token all the same.

A plain API client (curl, httpx: no Origin, no Sec-Fetch-Site, no cookie) passes.

The app's own origin is the scheme and host (with port) the request reached it
by: the scheme the request came by and `Host`, or, from a proxy the operator
trusts (`_forwarded`, which takes the headers out of anyone else's request),
`X-Forwarded-Proto` (already the scope's scheme) and `X-Forwarded-Host` (the
first, the client-facing proxy's, of a list). Behind a proxy that is not named,
the origin is the proxy's view of the app, and a browser's writes through it are
refused, saying so. The Host check (`_hosts`) looks at `Host` alone.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from starlette.requests import cookie_parser

from headgate.web._errors import (
    ASGIApp,
    Receive,
    Scope,
    Send,
    error,
    log,
    request_header,
    request_header_bytes,
)
from headgate.web._session import COOKIE, CSRF_HEADER, Session, Sessions

READ_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
SAME_ORIGIN_FETCHES: Final = frozenset({"same-origin", "none"})
FORM_CONTENT_TYPES: Final = frozenset(
    {"application/x-www-form-urlencoded", "multipart/form-data", "text/plain"}
)
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_SHOWN: Final = 100


def _first(value: str | None) -> str | None:
    """The first of a comma-separated list a chain of proxies built."""
    if value is None:
        return None
    first = value.split(",", 1)[0].strip()
    return first or None


def canonical_origin(scheme: str, authority: str) -> str | None:
    """`scheme://host[:port]` lower case, without the scheme's default port, or
    None if `authority` is not a host with an optional port."""
    scheme = scheme.strip().lower()
    try:
        parts = urlsplit(f"{scheme}://{authority.strip()}")
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname
    if not host or parts.path or parts.query or parts.fragment or parts.username is not None:
        return None
    shown = f"[{host}]" if ":" in host else host
    if port is None or port == _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{shown}"
    return f"{scheme}://{shown}:{port}"


def own_origin(scope: Scope) -> str | None:
    """This app's origin as the client reached it (see the module): X-Forwarded-Host
    is in the request only when a trusted proxy sent it."""
    scheme = str(scope.get("scheme", "http"))
    host = _first(request_header(scope, b"x-forwarded-host")) or request_header(scope, b"host")
    return None if host is None else canonical_origin(scheme, host)


def offered_origin(value: str) -> str | None:
    scheme, separator, authority = value.partition("://")
    return canonical_origin(scheme, authority) if separator else None


def bearer_credentials(scope: Scope) -> bytes | None:
    """The credentials of an `Authorization: Bearer ...` header, as sent (bytes:
    a UTF-8 token arrives as UTF-8), or None when there is no bearer header.

    The one test of "a bearer client's request", shared with the token check
    (`_auth`): that check judges such a request by the header alone, and every
    other one the login cookie may authorise, so it is asked for the CSRF token."""
    header = request_header_bytes(scope, b"authorization")
    if header is None:
        return None
    scheme, _, credentials = header.strip().partition(b" ")
    return credentials.strip() if scheme.lower() == b"bearer" else None


def session_cookie(scope: Scope) -> str | None:
    cookies = request_header(scope, b"cookie")
    return None if cookies is None else cookie_parser(cookies).get(COOKIE)


def cookie_session(scope: Scope, sessions: Sessions) -> Session | None:
    """The login session the request's cookie holds, if it was issued on the
    origin the request reached (a cookie reaches every port of its host name)."""
    return sessions.verify(session_cookie(scope), own_origin(scope))


class WriteGuard:
    """Refuses cross-site writes (see the module); `sessions` is None when no
    token is configured, and then no cookie authorises anything."""

    def __init__(self, app: ASGIApp, sessions: Sessions | None) -> None:
        self.app = app
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in READ_METHODS:
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        rule, message = refusal
        log.warning(
            "cross-site write refused",
            rule=rule,
            method=scope["method"],
            path=scope["path"][:_SHOWN],
            origin=(request_header(scope, b"origin") or "")[:_SHOWN],
        )
        await error(403, f"origin: {message}")(scope, receive, send)

    def _refusal(self, scope: Scope) -> tuple[str, str] | None:
        fetch_site = request_header(scope, b"sec-fetch-site")
        if fetch_site is not None and fetch_site.strip().lower() not in SAME_ORIGIN_FETCHES:
            return "sec-fetch-site", (
                f"Sec-Fetch-Site is {fetch_site[:_SHOWN]!r}: writes are accepted only from "
                "this app's own pages (same-origin) or from clients that are not browsers"
            )
        origin = request_header(scope, b"origin")
        if origin is not None:
            expected = own_origin(scope)
            if origin.strip().lower() == "null":
                return "origin", "Origin is null (a sandboxed or hidden page), not this app's own"
            if expected is None or offered_origin(origin) != expected:
                return "origin", (
                    f"Origin {origin[:_SHOWN]!r} is not this app's origin {expected!r} "
                    "(behind a proxy on another name or scheme, have it send "
                    "X-Forwarded-Host and X-Forwarded-Proto, and name it in "
                    "--forwarded-allow-ips)"
                )
        content_type = (request_header(scope, b"content-type") or "").split(";", 1)[0]
        if content_type.strip().lower() in FORM_CONTENT_TYPES:
            return "content-type", (
                f"Content-Type {content_type.strip()[:_SHOWN]!r} is one any page can send "
                "with a form: send application/json (or no body)"
            )
        if self.sessions is not None and bearer_credentials(scope) is None:
            session = cookie_session(scope, self.sessions)
            if session is not None and not self.sessions.csrf_matches(
                session, request_header(scope, CSRF_HEADER.encode())
            ):
                return "csrf", (
                    "a write made with the console's login cookie needs the X-CSRF-Token "
                    "header of the console page (API clients send a bearer token instead)"
                )
        return None
