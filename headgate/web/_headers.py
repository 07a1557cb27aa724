"""Response headers that tell the browser what the app's pages may do.

Every response: `X-Content-Type-Options: nosniff` (a JSON error quoting input is
never run as script or rendered as HTML), `Referrer-Policy: same-origin` (no URL
of the console, ids in it, reaches another site; same-origin rather than
no-referrer because no-referrer would also turn a same-origin form's Origin
into `null`), and a Content-Security-Policy whose `frame-ancestors` says who may
frame it: nobody by default (with `X-Frame-Options: DENY` for browsers that
predate it), so no other site can put the console's live buttons under a
decoy (clickjacking). A host that embeds the console names the framing origins
(`create_app(frame_ancestors=["https://portal.example"])`).

HTML pages get the console's policy: its own script and styles only, no inline
script, style or handler, no plugins, no <base>, forms posting only to itself.
A route that needs another policy (/docs) sets its own; frame-ancestors is
added to it. Anything else (JSON, metrics, static files) gets `default-src 'none'`.
HTML pages and JSON answers are also `Cache-Control: no-store` (unless a route
says otherwise): a logged-in page carries the session's CSRF token, and an
answer of the API a payload (a schedule's, a job's), which no cache, the
browser's back-forward one included, should keep.

`headgate serve`'s HTTP server answers some requests itself, before the app (a
request it cannot parse: 400; past the connection limit: 503): `answer_headers`
gives it the same headers, as any non-HTML answer of the app has them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from headgate.web._errors import ASGIApp, Message, Receive, Scope, Send

CONSOLE_POLICY: Final = "default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'"
OTHER_POLICY: Final = "default-src 'none'; base-uri 'none'; form-action 'none'"
_CSP: Final = b"content-security-policy"
_CACHE_CONTROL: Final = b"cache-control"
_FORBIDDEN_IN_SOURCE: Final = frozenset(';,"\\')
_NOT_KEPT: Final = frozenset({b"text/html", b"application/json"})
"""Answers no cache may keep (`Cache-Control: no-store`)."""


def frame_ancestors_directive(sources: Sequence[str] | None) -> str:
    """`frame-ancestors ...` for `sources` (None: nobody). Raises ValueError for a
    source that could break out of the header (a separator, a space, a control)."""
    if sources is None:
        return "frame-ancestors 'none'"
    if isinstance(sources, str) or not sources:
        raise ValueError(
            "frame_ancestors: a non-empty list of CSP sources, e.g. ['https://portal.example']"
        )
    for source in sources:
        if (
            not source
            or not source.isascii()
            or any(c.isspace() or not c.isprintable() or c in _FORBIDDEN_IN_SOURCE for c in source)
        ):
            raise ValueError(f"frame_ancestors: {source!r} is not a CSP source expression")
    return "frame-ancestors " + " ".join(sources)


def frame_options(sources: Sequence[str] | None) -> str | None:
    """The X-Frame-Options equivalent, where one exists."""
    if sources is None:
        return "DENY"
    if list(sources) == ["'self'"]:
        return "SAMEORIGIN"
    return None


def _fixed_headers(frame_ancestors: Sequence[str] | None) -> list[tuple[bytes, bytes]]:
    fixed = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin")]
    framing = frame_options(frame_ancestors)
    if framing is not None:
        fixed.append((b"x-frame-options", framing.encode()))
    return fixed


def answer_headers(frame_ancestors: Sequence[str] | None = None) -> list[tuple[bytes, bytes]]:
    """Every header SecurityHeaders gives a response that is not HTML: for the
    answers the HTTP server makes itself (see the module)."""
    policy = f"{OTHER_POLICY}; {frame_ancestors_directive(frame_ancestors)}".encode()
    return [(_CSP, policy), *_fixed_headers(frame_ancestors)]


class SecurityHeaders:
    def __init__(self, app: ASGIApp, frame_ancestors: Sequence[str] | None = None) -> None:
        self.app = app
        self.ancestors = frame_ancestors_directive(frame_ancestors).encode()
        self.fixed = _fixed_headers(frame_ancestors)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = self._headers(list(message.get("headers", [])))
            await send(message)

        await self.app(scope, receive, with_headers)

    def _headers(self, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        names = {name.lower() for name, _ in headers}
        kept = [(n, v) for n, v in headers if n.lower() != _CSP]
        policy = next((v for n, v in headers if n.lower() == _CSP), None)
        content_type = next((v for n, v in headers if n.lower() == b"content-type"), b"")
        media_type = content_type.split(b";", 1)[0].strip().lower()
        is_html = media_type == b"text/html"
        if policy is None:
            policy = (CONSOLE_POLICY if is_html else OTHER_POLICY).encode()
        kept.append((_CSP, policy + b"; " + self.ancestors))
        kept.extend((n, v) for n, v in self.fixed if n not in names)
        if media_type in _NOT_KEPT and _CACHE_CONTROL not in names:
            kept.append((_CACHE_CONTROL, b"no-store"))
        return kept
