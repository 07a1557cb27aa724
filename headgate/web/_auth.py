"""Optional token auth: with HEADGATE_API_TOKEN set, every request needs the token,
as a bearer header (API clients) or a cookie set by the console's login page;
all but the login page, the probes and the static files."""

from __future__ import annotations

import hmac
from typing import Final

from starlette.responses import HTMLResponse, JSONResponse

from headgate.web._errors import ASGIApp, Receive, Scope, Send
from headgate.web._probes import HEALTH_PATHS

COOKIE: Final = "headgate_token"
_OPEN_PATHS: Final = frozenset({"/login", *HEALTH_PATHS})
"""Paths answered without the token: the login page, and the probes (a load
balancer's or Kubernetes' carries none)."""
_OPEN_PREFIXES: Final = ("/static/",)
_LOGIN_PAGE: Final = """<!doctype html><html><head><meta charset="utf-8">
<title>Headgate login</title><link rel="stylesheet" href="{base}/static/console.css">
</head><body><main>
<h1>Headgate</h1><p>This console needs the API token.</p>
<form id="login">
<input type="password" name="token" placeholder="token" required autofocus>
<button type="submit">Log in</button> <span id="login-error" class="error"></span></form>
<script>
document.getElementById("login").addEventListener("submit", async (event) => {{
  event.preventDefault();
  const token = event.target.token.value;
  const response = await fetch("{base}/login", {{method: "POST",
    headers: {{"Content-Type": "application/json"}}, body: JSON.stringify({{token}})}});
  if (response.ok) {{ location.reload(); }}
  else {{ document.getElementById("login-error").textContent = "wrong token"; }}
}});
</script></main></body></html>"""


def login_page(base: str) -> str:
    return _LOGIN_PAGE.format(base=base)


def token_matches(expected: str, offered: str | None) -> bool:
    return offered is not None and hmac.compare_digest(expected.encode(), offered.encode())


class TokenAuth:
    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Mounted inside a host's app, the path still carries the mount's prefix
        # (the root path): the open paths are the app's own.
        base: str = scope.get("root_path", "")
        path: str = scope["path"].removeprefix(base) if base else scope["path"]
        if path in _OPEN_PATHS or path.startswith(_OPEN_PREFIXES) or self._authorised(scope):
            await self.app(scope, receive, send)
            return
        if path.startswith(("/api/", "/openapi.json", "/docs", "/metrics")):
            response: JSONResponse | HTMLResponse = JSONResponse(
                {"error": "authorization: a valid bearer token is required"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        else:
            response = HTMLResponse(login_page(base), status_code=401)
        await response(scope, receive, send)

    def _authorised(self, scope: Scope) -> bool:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        bearer = headers.get("authorization", "")
        if bearer.lower().startswith("bearer ") and token_matches(self.token, bearer[7:].strip()):
            return True
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and token_matches(self.token, value):
                return True
        return False
