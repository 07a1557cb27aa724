"""The console's login and logout: GET /login says where the visitor stands,
POST /login trades the token for a session cookie (`_session`), POST /logout
ends it. Both writes pass the write guard like every other (`_guard`): only the
console's own pages can make them, and logging out needs the session's CSRF token.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse

from headgate.web._auth import client_address, record_failure, token_matches, too_many_attempts
from headgate.web._console import format_ms
from headgate.web._guard import cookie_session, own_origin
from headgate.web._session import COOKIE, LEGACY_COOKIE, Sessions
from headgate.web._templates import page, request_session
from headgate.web._throttle import FailureThrottle, client_key

router = APIRouter(include_in_schema=False)


@router.get("/login")
def login_page(request: Request) -> HTMLResponse:
    """No token: says so, and what it means. Logged in: until when, and Log out.
    Otherwise the login form."""
    session = request_session(request)
    return page(
        request,
        "login.html",
        token_configured=request.app.state.api_token is not None,
        expires=format_ms(session.expires_at_ms) if session is not None else None,
    )


async def _offered_token(request: Request) -> str | None:
    try:
        body: Any = await request.json()
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested too deeply
        return None
    offered = body.get("token") if isinstance(body, dict) else None
    return offered if isinstance(offered, str) else None


@router.post("/login")
async def login(request: Request) -> JSONResponse:
    expected: str | None = request.app.state.api_token
    sessions: Sessions | None = request.app.state.sessions
    throttle: FailureThrottle = request.app.state.login_throttle
    if expected is None or sessions is None:
        return JSONResponse(
            {"error": "token: no API token is configured on this server; there is no login"},
            status_code=400,
        )
    client = client_key(client_address(request.scope))
    retry_after = throttle.retry_after_s(client)
    if retry_after is not None:
        return too_many_attempts(retry_after)
    if not token_matches(expected, await _offered_token(request)):
        record_failure(throttle, request.scope, "login failed")
        return JSONResponse({"error": "token: wrong or missing"}, status_code=401)
    throttle.succeeded(client)
    origin = own_origin(request.scope)
    if origin is None:  # no Host: the Host check answers such requests first
        return JSONResponse({"error": "host: the request names no host"}, status_code=400)
    session = sessions.issue(origin)
    response = JSONResponse({"ok": True, "expires_at_ms": session.expires_at_ms})
    # Sent only to this app (not to the rest of a host that mounts it), never
    # to scripts, never from another site's page, and only over HTTPS when the
    # console is reached by HTTPS (behind a proxy too: X-Forwarded-Proto). The
    # browser sends it to every port of the host name all the same: the
    # session is valid on this origin alone (`_session`).
    response.set_cookie(
        COOKIE,
        session.value,
        max_age=sessions.lifetime_ms // 1000,
        path=_cookie_path(request),
        httponly=True,
        samesite="strict",
        secure=_over_https(request),
    )
    response.delete_cookie(LEGACY_COOKIE, path=_cookie_path(request))
    return response


@router.post("/logout")
def logout(request: Request) -> JSONResponse:
    sessions: Sessions | None = request.app.state.sessions
    session = None if sessions is None else cookie_session(request.scope, sessions)
    if sessions is not None and session is not None:
        sessions.revoke(session)
    response = JSONResponse({"ok": True, "logged_out": session is not None})
    for name in (COOKIE, LEGACY_COOKIE):
        response.delete_cookie(
            name,
            path=_cookie_path(request),
            httponly=True,
            samesite="strict",
            secure=_over_https(request),
        )
    return response


def _cookie_path(request: Request) -> str:
    return str(request.scope.get("root_path") or "/")


def _over_https(request: Request) -> bool:
    return (own_origin(request.scope) or "").startswith("https://")
